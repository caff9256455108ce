package fencedlease

import (
	"fmt"
	"math"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/internal/grantorder"
	"github.com/fencedlease/fencedlease/pkg/leaserecord"
)

// classify judges the Lease record and the clocks for grant h (nil: none).
func classify(w world, h *fencingv1.Holder) input {
	in := input{world: w, h: h}
	if h == nil {
		in.state = in.record.State(w.fl.Name, "", "", 0)
		in.handedOver = handedOver(in.state, in.record, w.recorded)
		return in
	}
	in.state = in.record.State(w.fl.Name, h.PodName, h.PodUID, h.Token)
	in.handedOver = handedOver(in.state, in.record, w.recorded)
	in.started = h.FirstRenewTime != nil || in.record.GrantRenewed(w.fl.Name, h.PodName, h.PodUID, h.Token)
	in.revokeRequested = revokeRequestedFor(w.fl, h)
	in.limit = startupDeadline(h, w.fl)
	if in.started {
		in.limit = grantDuration(h, w.fl)
	}
	in.left = w.held.observedAt.Add(in.limit).Sub(w.now)
	in.graceLeft = handoffGraceLeft(w, h)
	if in.started && w.holder != nil {
		in.cannotRun, in.lastCrash = grantorder.RunFailure(w.holder), lastCrash(w.holder)
	}
	if !in.started && w.holder != nil {
		in.cannotStart = grantorder.StartFailure(w.holder)
		if msg := unschedulable(w.holder); in.cannotStart == "" && msg != "" {
			// Counted from this process's first look at the grant, on its own clock.
			if in.unschedulableLeft = w.held.observedAt.Add(unschedulableBound).Sub(w.now); in.unschedulableLeft <= 0 {
				in.cannotStart, in.unschedulableLeft = fmt.Sprintf("%s (for %v)", msg, unschedulableBound), 0
			}
		}
	}
	return in
}

// decide is the pass's decision on what was observed, with the plan that carries it out:
// the writes in order, when to look again, what to remember. It is pure: the writes all
// happen after it (Reconciler.run), and nothing after it decides again.
func decide(w world) decision {
	d := judge(w)
	d.plan = planFor(w, d)
	return d
}

// judge computes the next status from what was observed: the holder rules judge the
// grant the status names, then the grant rule may name the next holder (G1).
func judge(w world) decision {
	fl := w.fl
	d := decision{status: *fl.Status.DeepCopy(), now: w.now}
	st := &d.status
	st.ObservedGeneration = fl.Generation
	in := classify(w, st.Holder)
	d.leaseShowsHolder = in.state == leaserecord.StateGranted || in.state == leaserecord.StateRenewed
	if st.Holder != nil {
		d.apply(&in)
	}
	if d.foreignLease = in.state == leaserecord.StateForeign; d.foreignLease {
		// Not ours: adopt nothing, grant nothing, and leave the Lease alone (A3).
		setHeldCondition(st, fl, w.lease.Name, false)
		setReadyCondition(st, fl)
		// The cache holds labeled Leases only, so the foreign one's deletion brings no
		// event: look again soon.
		d.requeueAfter = conflictRecheck
		return d
	}
	// The token floor: the Lease's high-water token (a re-created FencedLease continues
	// above it) and spec.minFencingToken (a restore continues above it; below).
	st.FencingToken = max(st.FencingToken, in.record.Token, w.floor)
	var ended types.UID
	if t := d.released(); t != nil {
		ended = t.holder.PodUID
	}
	waiting := grantorder.PassOver(notAwaitingW1(w.fl, grantorder.Candidates(w.pods, st, ended)), grantorder.WithSilentNode(w.unfitNodes, d.revoked(), in.holder))
	delayLeft := revocationDelayLeft(w, st, d.revoked())
	waiting, adopted := d.nextGrant(w, &in, waiting, delayLeft)
	st.Waiting = int32(len(waiting))
	setHeldCondition(st, fl, "", delayLeft > 0)
	setReadyCondition(st, fl)
	d.recordLastRenewal(w)
	d.deferStatus(w, &in, adopted)
	if adopted && d.statusWait == 0 {
		// Recorded now, judged next: the holder rules have not seen this grant yet (it may
		// have renewed, or its pod report that it cannot start, with no event to come).
		d.requeueAfter = adoptedRecheck
	}
	return d
}

// nextGrant names the next holder, if any, into the status: the grant a hand-over already
// made on the Lease (adopted), or G1's choice among waiting once no lock-delay is left. It
// returns the pods still waiting after it, and whether the grant was adopted.
func (d *decision) nextGrant(w world, in *input, waiting []*corev1.Pod, delayLeft time.Duration) ([]*corev1.Pod, bool) {
	st, fl := &d.status, w.fl
	var next *transition
	var adopted, counted bool
	if in.handedOver && st.Holder == nil {
		if t, ok := adoptRule(w, in.record); ok {
			next, adopted = &t, true // the grant the hand-over already made
		} else if findPod(slices.Concat(w.pods, w.unlabeled), in.record.HolderUID) == nil {
			// Made on the Lease and released there, its pod gone: nobody to record, but
			// a grant was made — counted, its token spent, in a status write of this
			// pass (a next grant's is then made status first).
			st.Transitions++
			counted = true
		}
	}
	if st.Holder == nil && !adopted {
		// spec.minFencingToken from the next grant on: a holder keeps its own token — an
		// adopted one too — on the Lease as well, where its library reads it and would
		// stop on any other.
		st.FencingToken = max(st.FencingToken, fl.Spec.MinFencingToken)
	}
	switch {
	case adopted:
	case delayLeft > 0 && st.Holder == nil:
		d.requeueAfter = delayLeft // G1 waits out the lock-delay (X8)
	default:
		if t, ok := grantRule(w, st, w.slot.mayGrant(waiting)); ok {
			next = &t
		}
	}
	if next != nil {
		d.grant = next
		d.grantOnLease = !adopted && !counted && fl.Status.Holder == nil
		waiting = slices.DeleteFunc(waiting, func(p *corev1.Pod) bool { return p.UID == next.holder.PodUID })
		st.FencingToken = max(st.FencingToken, next.holder.Token)
		st.Transitions++
		st.Holder = next.holder.DeepCopy()
		d.requeueAfter = next.requeueAfter
	}
	return waiting, adopted
}

// adoptedRecheck is how soon a grant adopted off the Lease is judged by the holder rules.
const adoptedRecheck = 10 * time.Millisecond

// apply runs the holder rules on in and writes their verdict into the status.
func (d *decision) apply(in *input) {
	t, _ := holderRules.evaluate(in)
	d.end = &t
	d.requeueAfter = t.requeueAfter
	st := &d.status
	switch t.kind {
	case revoke:
		h, at := st.Holder, in.now
		if !t.at.IsZero() {
			at = t.at // decided earlier, recorded now (a hand-over's status write waited)
		}
		st.LastRevocation = &fencingv1.Revocation{PodName: h.PodName, PodUID: h.PodUID, Token: h.Token,
			Reason: t.revocation, Message: truncate(t.message, 1024), Time: *microTime(at)}
		if delay := revocationDelay(in.fl, t.revocation); delay > 0 {
			st.LastRevocation.DelaySeconds = delay
			st.LastRevocation.NextGrantTime = microTime(at.Add(time.Duration(delay) * time.Second))
		}
		st.Revocations++
		st.Holder = nil
	case release:
		st.Holder = nil
	case askHandoff:
		st.Holder.Handoff = t.successor.DeepCopy()
	case withdrawHandoff:
		st.Holder.Handoff = nil
	}
	if h := st.Holder; h != nil && h.FirstRenewTime == nil && in.state == leaserecord.StateRenewed {
		// The first renewal, recorded once: from here the grant runs on its lease duration.
		h.FirstRenewTime = microTime(in.held.observedAt)
		h.LastRenewTime = microTime(in.held.observedAt)
	}
}

// grantRule: with no holder, not suspended, not being deleted and tokens left, the
// oldest candidate — or the successor a hand-off named — is granted the next token (G1).
func grantRule(w world, st *fencingv1.FencedLeaseStatus, waiting []*corev1.Pod) (transition, bool) {
	fl := w.fl
	if st.Holder != nil || fl.Spec.Suspend || fl.DeletionTimestamp != nil || len(waiting) == 0 ||
		st.FencingToken == math.MaxInt64 {
		return transition{}, false
	}
	newer := w.successor
	if newer != nil && grantorder.StandbyUnfit(newer, w.unfitNodes) != "" {
		// H4 prefers the newer revision's standby only when it can take over now: one
		// still pulling its image, or failing to between two back-offs, would leave the
		// singleton idle while a running standby of the old revision waits.
		newer = nil
	}
	next := waiting[grantorder.SuccessorIndex(waiting, fl.Status.Holder, newer)]
	h := fencingv1.Holder{
		PodName:                next.Name,
		PodUID:                 next.UID,
		Token:                  st.FencingToken + 1,
		AcquireTime:            *microTime(w.now),
		LastRenewTime:          microTime(w.now),
		LeaseDurationSeconds:   specDurationSeconds(fl),
		StartupDeadlineSeconds: startupSecondsFor(fl, next),
	}
	return transition{kind: grant, ruleName: "grant", holder: h, podCreated: next.CreationTimestamp.Time,
		requeueAfter: startupDeadline(&h, fl)}, true
}

// adoptRule: the Lease names the next grant already (the hand-over's compare-and-swap,
// X3 with G2) and the status does not: the status records that grant as the Lease has it
// (G1 after the fact), so a grant a Warm holder may already work under is never made
// again to another pod. Its startup deadline counts from this process's first look. A
// grant its holder released already is recorded all the same — its pod is marked with its
// token, so it is never granted again — and released by the next pass (L2). False when
// there is nobody to record (released, its pod gone: judge counts it) or its pod shows
// the grant ended already.
func adoptRule(w world, rec leaserecord.Record) (transition, bool) {
	name := rec.Holder
	p := findPod(slices.Concat(w.pods, w.unlabeled), rec.HolderUID)
	if name == "" && p != nil {
		name = p.Name
	}
	if name == "" || p != nil && endedOnPod(p, rec.Token) {
		// Nobody to record, or a grant already recorded and ended (a slot keeps no
		// record of a release but its pod's mark): the Lease is only a tombstone.
		return transition{}, false
	}
	acquire := rec.AcquireTime
	if acquire == nil {
		acquire = microTime(w.now)
	}
	h := fencingv1.Holder{
		PodName:                name,
		PodUID:                 rec.HolderUID,
		Token:                  rec.Token,
		AcquireTime:            *acquire.DeepCopy(),
		LastRenewTime:          acquire.DeepCopy(),
		LeaseDurationSeconds:   specDurationSeconds(w.fl),
		StartupDeadlineSeconds: startupSecondsFor(w.fl, findPod(w.pods, rec.HolderUID)),
	}
	if rec.DurationSeconds > 0 {
		h.LeaseDurationSeconds = rec.DurationSeconds
	}
	if rec.Renewed() {
		// Its holder renewed already (R2): recorded in the same write as the grant.
		h.FirstRenewTime, h.LastRenewTime = microTime(w.now), microTime(w.now)
	}
	t := transition{kind: grant, ruleName: "adopt the handed-over grant", holder: h, requeueAfter: startupDeadline(&h, w.fl)}
	if p := findPod(w.pods, rec.HolderUID); p != nil {
		t.podCreated = p.CreationTimestamp.Time
	}
	return t, true
}

// recordLastRenewal moves status.holder.lastRenewTime to the last renewal this process saw
// happen, but only when the status is written anyway: a renewal alone never costs a status
// write (expiry is judged on the grant memory, never on this field). A new leader's first look
// is not a renewal it saw happen, so it moves nothing.
func (d *decision) recordLastRenewal(w world) {
	h, was := d.status.Holder, w.fl.Status.Holder
	if h == nil || was == nil || h.PodUID != was.PodUID || h.Token != was.Token ||
		w.held.renewTime == nil || !w.held.seenRenewing {
		return
	}
	if w.unchanged(&d.status) {
		return
	}
	h.LastRenewTime = microTime(w.held.observedAt)
}
