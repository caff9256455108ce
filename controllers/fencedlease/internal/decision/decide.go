package decision

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

// Classify judges the Lease record and the clocks for grant h (nil: none).
func Classify(w World, h *fencingv1.Holder) Input {
	in := Input{World: w, H: h}
	if h == nil {
		in.State = in.Record.State(w.FL.Name, "", "", 0)
		in.handedOver = handedOver(in.State, in.Record, w.Recorded)
		return in
	}
	in.State = in.Record.State(w.FL.Name, h.PodName, h.PodUID, h.Token)
	in.handedOver = handedOver(in.State, in.Record, w.Recorded)
	in.Started = h.FirstRenewTime != nil || in.Record.GrantRenewed(w.FL.Name, h.PodName, h.PodUID, h.Token)
	in.revokeRequested = revokeRequestedFor(w.FL, h)
	in.limit = startupDeadline(h, w.FL)
	if in.Started {
		in.limit = GrantDuration(h, w.FL)
	}
	in.left = w.Held.ObservedAt.Add(in.limit).Sub(w.Now)
	in.graceLeft = handoffGraceLeft(w, h)
	if in.Started && w.Holder != nil {
		in.cannotRun, in.lastCrash = grantorder.RunFailure(w.Holder), lastCrash(w.Holder)
	}
	if !in.Started && w.Holder != nil {
		in.cannotStart = grantorder.StartFailure(w.Holder)
		if msg := unschedulable(w.Holder); in.cannotStart == "" && msg != "" {
			// Counted from this process's first look at the grant, on its own clock.
			if in.unschedulableLeft = w.Held.ObservedAt.Add(UnschedulableBound).Sub(w.Now); in.unschedulableLeft <= 0 {
				in.cannotStart, in.unschedulableLeft = fmt.Sprintf("%s (for %v)", msg, UnschedulableBound), 0
			}
		}
	}
	return in
}

// Decide is the pass's decision on what was observed, with the plan that carries it out:
// the writes in order, when to look again, what to remember. It is pure: the writes all
// happen after it (Reconciler.run), and nothing after it decides again.
func Decide(w World) Decision {
	d := judge(w)
	d.Plan = planFor(w, d)
	if GrantsOnLease(w, d) {
		d.Plan.landsTokenAt(grantStep(d))
	}
	return d
}

// judge computes the next status from what was observed: the holder rules judge the
// grant the status names, then the grant rule may name the next holder (G1).
func judge(w World) Decision {
	fl := w.FL
	d := Decision{Status: *fl.Status.DeepCopy(), now: w.Now}
	st := &d.Status
	st.ObservedGeneration = fl.Generation
	in := Classify(w, st.Holder)
	d.LeaseShowsHolder = in.State == leaserecord.StateGranted || in.State == leaserecord.StateRenewed
	if st.Holder != nil {
		d.apply(&in)
	}
	if d.foreignLease = in.State == leaserecord.StateForeign; d.foreignLease {
		// Not ours: adopt nothing, grant nothing, and leave the Lease alone (A3).
		SetHeldCondition(st, fl, w.Lease.Name, false)
		SetReadyCondition(st, fl)
		// The cache holds labeled Leases only, so the foreign one's deletion brings no
		// event: look again soon.
		d.RequeueAfter = ConflictRecheck
		return d
	}
	// The token floor: the Lease's high-water token (a re-created FencedLease continues
	// above it) and spec.minFencingToken (a restore continues above it; below).
	st.FencingToken = max(st.FencingToken, in.Record.Token, w.Floor)
	var ended types.UID
	if t := d.Released(); t != nil {
		ended = t.Holder.PodUID
	}
	waiting := grantorder.PassOver(NotAwaitingW1(w.FL, CandidatesFor(w, st, ended)), grantorder.WithSilentNode(w.UnfitNodes, d.Revoked(), in.Holder))
	delayLeft := revocationDelayLeft(w, st, d.Revoked())
	waiting, adopted := d.nextGrant(w, &in, waiting, delayLeft)
	st.Waiting = int32(len(waiting))
	SetHeldCondition(st, fl, "", delayLeft > 0)
	SetReadyCondition(st, fl)
	d.recordLastRenewal(w)
	d.deferStatus(w, &in, adopted)
	if adopted && d.StatusWait == 0 {
		// Recorded now, judged next: the holder rules have not seen this grant yet (it may
		// have renewed, or its pod report that it cannot start, with no event to come).
		d.RequeueAfter = AdoptedRecheck
	}
	return d
}

// nextGrant names the next holder, if any, into the status: the grant a hand-over already
// made on the Lease (adopted), or G1's choice among waiting once no lock-delay is left. It
// returns the pods still waiting after it, and whether the grant was adopted.
func (d *Decision) nextGrant(w World, in *Input, waiting []*corev1.Pod, delayLeft time.Duration) ([]*corev1.Pod, bool) {
	st, fl := &d.Status, w.FL
	var next *Transition
	var adopted, counted bool
	if in.handedOver && st.Holder == nil {
		if t, ok := adoptRule(w, in.Record); ok {
			next, adopted = &t, true // the grant the hand-over already made
		} else if w.anyPodOf(in.Record.HolderUID) == nil {
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
		d.RequeueAfter = delayLeft // G1 waits out the lock-delay (X8)
	default:
		if t, ok := GrantRule(w, st, w.Slot.MayGrant(waiting)); ok {
			next = &t
		}
	}
	if next != nil {
		d.Grant = next
		d.GrantOnLease = !adopted && !counted && fl.Status.Holder == nil
		waiting = slices.DeleteFunc(waiting, func(p *corev1.Pod) bool { return p.UID == next.Holder.PodUID })
		st.FencingToken = max(st.FencingToken, next.Holder.Token)
		st.Transitions++
		st.Holder = next.Holder.DeepCopy()
		d.RequeueAfter = next.RequeueAfter
	}
	return waiting, adopted
}

// AdoptedRecheck is how soon a grant adopted off the Lease is judged by the holder rules.
const AdoptedRecheck = 10 * time.Millisecond

// apply runs the holder rules on in and writes their verdict into the status.
func (d *Decision) apply(in *Input) {
	t, _ := HolderRules.Evaluate(in)
	d.End = &t
	d.RequeueAfter = t.RequeueAfter
	st := &d.Status
	switch t.Kind {
	case Revoke:
		h, at := st.Holder, in.Now
		if !t.at.IsZero() {
			at = t.at // decided earlier, recorded now (a hand-over's status write waited)
		}
		st.LastRevocation = &fencingv1.Revocation{PodName: h.PodName, PodUID: h.PodUID, Token: h.Token,
			Reason: t.Revocation, Message: truncate(t.Message, 1024), Time: *MicroTime(at)}
		if delay := revocationDelay(in.FL, t.Revocation); delay > 0 {
			st.LastRevocation.DelaySeconds = delay
			st.LastRevocation.NextGrantTime = MicroTime(at.Add(time.Duration(delay) * time.Second))
		}
		st.Revocations++
		st.Holder = nil
	case Release:
		st.Holder = nil
	case AskHandoff:
		st.Holder.Handoff = t.Successor.DeepCopy()
	case WithdrawHandoff:
		st.Holder.Handoff = nil
	}
	if h := st.Holder; h != nil && h.FirstRenewTime == nil && in.State == leaserecord.StateRenewed {
		// The first renewal, recorded once: from here the grant runs on its lease duration.
		h.FirstRenewTime = MicroTime(in.Held.ObservedAt)
		h.LastRenewTime = MicroTime(in.Held.ObservedAt)
	}
}

// GrantRule: with no holder, not suspended, not being deleted and tokens left, the
// oldest candidate — or the successor a hand-off named — is granted the next token (G1).
func GrantRule(w World, st *fencingv1.FencedLeaseStatus, waiting []*corev1.Pod) (Transition, bool) {
	fl := w.FL
	if st.Holder != nil || fl.Spec.Suspend || fl.DeletionTimestamp != nil || len(waiting) == 0 ||
		st.FencingToken == math.MaxInt64 {
		return Transition{}, false
	}
	newer := w.Successor
	if newer != nil && grantorder.StandbyUnfit(newer, w.UnfitNodes) != "" {
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
		AcquireTime:            *MicroTime(w.Now),
		LastRenewTime:          MicroTime(w.Now),
		LeaseDurationSeconds:   specDurationSeconds(fl),
		StartupDeadlineSeconds: StartupSecondsFor(fl, next),
	}
	return Transition{Kind: Grant, RuleName: "grant", Holder: h, PodCreated: next.CreationTimestamp.Time,
		RequeueAfter: startupDeadline(&h, fl)}, true
}

// adoptRule: the Lease names the next grant already (the hand-over's compare-and-swap,
// X3 with G2) and the status does not: the status records that grant as the Lease has it
// (G1 after the fact), so a grant a Warm holder may already work under is never made
// again to another pod. Its startup deadline counts from this process's first look. A
// grant its holder released already is recorded all the same — its pod is marked with its
// token, so it is never granted again — and released by the next pass (L2). False when
// there is nobody to record (released, its pod gone: judge counts it) or its pod shows
// the grant ended already.
func adoptRule(w World, rec leaserecord.Record) (Transition, bool) {
	name := rec.Holder
	p := w.anyPodOf(rec.HolderUID)
	if name == "" && p != nil {
		name = p.Name
	}
	if name == "" || p != nil && endedOnPod(p, rec.Token) {
		// Nobody to record, or a grant already recorded and ended (a slot keeps no
		// record of a release but its pod's mark): the Lease is only a tombstone.
		return Transition{}, false
	}
	acquire := rec.AcquireTime
	if acquire == nil {
		acquire = MicroTime(w.Now)
	}
	h := fencingv1.Holder{
		PodName:                name,
		PodUID:                 rec.HolderUID,
		Token:                  rec.Token,
		AcquireTime:            *acquire.DeepCopy(),
		LastRenewTime:          acquire.DeepCopy(),
		LeaseDurationSeconds:   specDurationSeconds(w.FL),
		StartupDeadlineSeconds: StartupSecondsFor(w.FL, w.PodOf(rec.HolderUID)),
	}
	if rec.DurationSeconds > 0 {
		h.LeaseDurationSeconds = rec.DurationSeconds
	}
	if rec.Renewed() {
		// Its holder renewed already (R2): recorded in the same write as the grant.
		h.FirstRenewTime, h.LastRenewTime = MicroTime(w.Now), MicroTime(w.Now)
	}
	t := Transition{Kind: Grant, RuleName: "adopt the handed-over grant", Holder: h, RequeueAfter: startupDeadline(&h, w.FL)}
	if p := w.PodOf(rec.HolderUID); p != nil {
		t.PodCreated = p.CreationTimestamp.Time
	}
	return t, true
}

// recordLastRenewal moves status.holder.lastRenewTime to the last renewal this process saw
// happen, but only when the status is written anyway: a renewal alone never costs a status
// write (expiry is judged on the grant memory, never on this field). A new leader's first look
// is not a renewal it saw happen, so it moves nothing.
func (d *Decision) recordLastRenewal(w World) {
	h, was := d.Status.Holder, w.FL.Status.Holder
	if h == nil || was == nil || h.PodUID != was.PodUID || h.Token != was.Token ||
		w.Held.RenewTime == nil || !w.Held.SeenRenewing {
		return
	}
	if w.Unchanged(&d.Status) {
		return
	}
	h.LastRenewTime = MicroTime(w.Held.ObservedAt)
}
