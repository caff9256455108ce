package fencedlease

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/internal/grantorder"
	"github.com/fencedlease/fencedlease/pkg/leaserecord"
)

// world is what a reconcile observed.
type world struct {
	fl    *fencingv1.FencedLease
	lease *coordinationv1.Lease // nil when there is none yet
	pods  []corev1.Pod          // every pod labeled for this FencedLease
	// holder is the pod status.holder names, confirmed by UID: from pods, or read
	// uncached by name when it is not among them. nil when it is gone.
	holder *corev1.Pod
	// unlabeled are pods outside pods that the projection must still reach: a holder
	// that lost its label, or the pod of a LabelRemoved revocation not yet finished.
	unlabeled []corev1.Pod
	// renewal is the tracker's view of the current holder's renewals; zero without holder.
	renewal renewal
	// leaseUnread: the cache shows no Lease and the API server was not asked (lease nil).
	leaseUnread bool
	// grantedOnLeaseAt is when this process wrote the grant the Lease names and the status
	// does not record yet (G2 on an idle FencedLease); zero when it did not.
	grantedOnLeaseAt time.Time
	// successor is a waiting pod of a newer revision of the holder's own Deployment or
	// StatefulSet; looked up only while the holder has not been asked to hand off.
	successor *corev1.Pod
	// handoffSince is when this process first saw the holder asked to hand off.
	handoffSince time.Time
	// delaySince is when this process began the lock-delay of status.lastRevocation
	// (zero when it has none).
	delaySince time.Time
	// unfitNodes says, of the nodes Warm candidates run on, why one cannot take a grant
	// now (cordoned, unreachable, not Ready); a node that can is absent.
	unfitNodes map[string]string
	// now is the controller's clock, read before the Lease; it carries a monotonic
	// reading in production.
	now time.Time
}

// input is the world classified once for the rules: the Lease read through the one
// reader, relative to the grant the status names, and the grant's clocks.
type input struct {
	world
	// h is the grant the status names; nil when none.
	h      *fencingv1.Holder
	record leaserecord.Record
	state  leaserecord.State
	// started: h renewed at least once (recorded in the status, or read off the Lease).
	started bool
	// revokeRequested: the FencedLease asks to revoke exactly h (Q1).
	revokeRequested bool
	// limit is h's running limit, left what remains of it since the last observed
	// renewal, graceLeft what remains of a hand-off grace period (0 without a request).
	limit, left, graceLeft time.Duration
	// cannotStart says why h's pod, never renewed, cannot start ("" when nothing says so);
	// unschedulableLeft is how long an unschedulable one has before that counts (0 when
	// it is not unschedulable, or already counts).
	cannotStart       string
	unschedulableLeft time.Duration
	// cannotRun says why h's pod, renewed, has a container that cannot run ("" when
	// nothing says so).
	cannotRun string
	// lastCrash says how a container of h's pod last ended, when one restarted ("" when
	// none did): what a cut-off holder between two back-offs still shows.
	lastCrash string
	// handedOver: the Lease names the next grant already — the hand-over's
	// compare-and-swap (X3 with G2), or a grant's first write on an idle FencedLease
	// (G2), landed, and the status write after it did not (yet).
	handedOver bool
}

// classify reads the Lease and the clocks for grant h (nil: none).
func classify(w world, h *fencingv1.Holder) input {
	in := input{world: w, h: h, record: leaserecord.Read(w.lease)}
	if h == nil {
		in.state = in.record.State(w.fl.Name, "", "", 0)
		in.handedOver = in.state == leaserecord.StateOther && in.record.Ahead(w.fl.Status.FencingToken)
		return in
	}
	in.state = in.record.State(w.fl.Name, h.PodName, h.PodUID, h.Token)
	in.handedOver = in.state == leaserecord.StateOther && in.record.Ahead(w.fl.Status.FencingToken)
	in.started = h.FirstRenewTime != nil || in.record.GrantRenewed(w.fl.Name, h.PodName, h.PodUID, h.Token)
	in.revokeRequested = revokeRequested(w.fl, h)
	in.limit = startupDeadline(h, w.fl)
	if in.started {
		in.limit = grantDuration(h, w.fl)
	}
	in.left = w.renewal.observedAt.Add(in.limit).Sub(w.now)
	in.graceLeft = handoffGraceLeft(w, h)
	if in.started && w.holder != nil {
		in.cannotRun, in.lastCrash = grantorder.RunFailure(w.holder), lastCrash(w.holder)
	}
	if !in.started && w.holder != nil {
		in.cannotStart = grantorder.StartFailure(w.holder)
		if msg := unschedulable(w.holder); in.cannotStart == "" && msg != "" {
			// Counted from this process's first look at the grant, on its own clock.
			if in.unschedulableLeft = w.renewal.observedAt.Add(unschedulableBound).Sub(w.now); in.unschedulableLeft <= 0 {
				in.cannotStart, in.unschedulableLeft = fmt.Sprintf("%s (for %v)", msg, unschedulableBound), 0
			}
		}
	}
	return in
}

// conflictRecheck is how often a FencedLease blocked by a foreign Lease looks again.
const conflictRecheck = 5 * time.Second

// decide computes the next status from what was observed: the holder rules judge the
// grant the status names, then the grant rule may name the next holder (G1). It is pure:
// all writes happen after it, starting with the Lease when a transition must clear it
// first or the Lease is the grant's first record (X3, G2), then the status it returns.
func decide(w world) decision {
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
	// above it) and spec.minFencingToken (a restore continues above it). The latter from
	// the next grant: a holder keeps its own token, on the Lease too, where its library
	// reads it and would stop on any other.
	st.FencingToken = max(st.FencingToken, in.record.Token)
	if st.Holder == nil {
		st.FencingToken = max(st.FencingToken, fl.Spec.MinFencingToken)
	}
	var ended types.UID
	if t := d.released(); t != nil {
		ended = t.holder.PodUID
	}
	waiting := grantorder.PassOver(grantorder.Candidates(w.pods, st, ended), grantorder.WithSilentNode(w.unfitNodes, d.revoked(), in.holder))
	delayLeft := revocationDelayLeft(w, st, d.revoked())
	var next *transition
	adopted := in.handedOver && st.Holder == nil
	switch {
	case adopted:
		t := adoptRule(w, in.record) // the grant the hand-over already made
		next = &t
	case delayLeft > 0 && st.Holder == nil:
		d.requeueAfter = delayLeft // G1 waits out the lock-delay (X8)
	default:
		if t, ok := grantRule(w, st, waiting); ok {
			next = &t
		}
	}
	if next != nil {
		d.grant = next
		d.grantOnLease = !adopted && fl.Status.Holder == nil
		waiting = slices.DeleteFunc(waiting, func(p *corev1.Pod) bool { return p.UID == next.holder.PodUID })
		st.FencingToken = max(st.FencingToken, next.holder.Token)
		st.Transitions++
		st.Holder = next.holder.DeepCopy()
		d.requeueAfter = next.requeueAfter
	}
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
		h.FirstRenewTime = microTime(in.renewal.observedAt)
		h.LastRenewTime = microTime(in.renewal.observedAt)
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
	next := waiting[grantorder.SuccessorIndex(waiting, fl.Status.Holder, w.successor)]
	h := fencingv1.Holder{
		PodName:                next.Name,
		PodUID:                 next.UID,
		Token:                  st.FencingToken + 1,
		AcquireTime:            *microTime(w.now),
		LastRenewTime:          microTime(w.now),
		LeaseDurationSeconds:   specDurationSeconds(fl),
		StartupDeadlineSeconds: startupSecondsFor(fl, next),
	}
	return transition{kind: grant, rule: "grant", holder: h, podCreated: next.CreationTimestamp.Time,
		requeueAfter: startupDeadline(&h, fl)}, true
}

// adoptRule: the Lease names the next grant already (the hand-over's compare-and-swap,
// X3 with G2) and the status does not: the status records that grant as the Lease has it
// (G1 after the fact), so a grant a Warm holder may already work under is never made
// again to another pod. Its startup deadline counts from this process's first look.
func adoptRule(w world, rec leaserecord.Record) transition {
	acquire := rec.AcquireTime
	if acquire == nil {
		acquire = microTime(w.now)
	}
	h := fencingv1.Holder{
		PodName:                rec.Holder,
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
	t := transition{kind: grant, rule: "adopt the handed-over grant", holder: h, requeueAfter: startupDeadline(&h, w.fl)}
	if p := findPod(w.pods, rec.HolderUID); p != nil {
		t.podCreated = p.CreationTimestamp.Time
	}
	return t
}

// recordLastRenewal moves status.holder.lastRenewTime to the last renewal this process saw
// happen, but only when the status is written anyway: a renewal alone never costs a status
// write (expiry is judged on the tracker, never on this field). A new leader's first look
// is not a renewal it saw happen, so it moves nothing.
func (d *decision) recordLastRenewal(w world) {
	h, was := d.status.Holder, w.fl.Status.Holder
	if h == nil || was == nil || h.PodUID != was.PodUID || h.Token != was.Token ||
		w.renewal.renewTime == nil || !w.renewal.seenRenewing {
		return
	}
	if equality.Semantic.DeepEqual(d.status, w.fl.Status) {
		return
	}
	h.LastRenewTime = microTime(w.renewal.observedAt)
}

// waitingOutCutOff is true while holder h stands cut off on purpose (C1: after a
// hand-off grace period, on a revoke request, or because its pod cannot run) and is
// revoked only when the lease it last renewed has run out.
func waitingOutCutOff(rec leaserecord.Record, fl *fencingv1.FencedLease, h *fencingv1.Holder) bool {
	return rec.CutOff(h.Token) && (h.Handoff != nil || revokeRequested(fl, h) || cutOffFor(rec, fencingv1.ReasonPodCannotRun))
}

// cutOffFor: the Lease records that the operator cut its holder off for reason.
func cutOffFor(rec leaserecord.Record, reason fencingv1.RevocationReason) bool {
	return rec.CutOffReason == string(reason)
}

// revokeRequested: the FencedLease asks to revoke exactly grant h (RevokeAnnotation; Q1).
func revokeRequested(fl *fencingv1.FencedLease, h *fencingv1.Holder) bool {
	v, ok := fl.Annotations[fencingv1.RevokeAnnotation]
	return ok && v == strconv.FormatInt(h.Token, 10)
}

// handoffGraceLeft is how long a holder asked to hand off still has to release, on this
// process's clock from when it first saw the request.
func handoffGraceLeft(w world, h *fencingv1.Holder) time.Duration {
	if h.Handoff == nil {
		return 0
	}
	since := w.handoffSince
	if since.IsZero() {
		since = w.now // asked in this decision
	}
	return since.Add(time.Duration(h.Handoff.GracePeriodSeconds) * time.Second).Sub(w.now)
}

// lateness is how long after its expiry a grant is revoked, for the metric: on this
// process's clock. A process that never saw the holder renew (it took over as leader, or
// restarted, after the last renewal) counts instead from the renewTime the holder last
// wrote on the Lease, when that is earlier: the holder's clock against this one, for the
// metric only — it decides nothing — so the metric shows the delay a failover adds (each
// new leader gives the holder a whole lease from its first look).
func lateness(w world, limit, local time.Duration) time.Duration {
	if w.renewal.seenRenewing || w.renewal.renewTime == nil {
		return local
	}
	return max(local, w.now.Sub(w.renewal.renewTime.Add(limit)))
}

// specDurationSeconds is the duration a grant made now gets.
func specDurationSeconds(fl *fencingv1.FencedLease) int32 {
	if s := fl.Spec.LeaseDurationSeconds; s > 0 {
		return s
	}
	return 15
}

// specStartupSeconds is the startup deadline a grant made now gets.
func specStartupSeconds(fl *fencingv1.FencedLease) int32 {
	if s := fl.Spec.StartupDeadlineSeconds; s > 0 {
		return s
	}
	return 300
}

// startupSecondsFor is the startup deadline a grant to pod p freezes: the spec's, or —
// p a Warm standby already running, whose process waits on the Lease and confirms the
// grant at once — a confirmation bound on the scale of the lease when that is shorter:
// two lease durations, at least warmConfirmFloor. A standby that cannot confirm (its node
// cut off before the node controller says so) then costs that, not a cold start's
// deadline.
func startupSecondsFor(fl *fencingv1.FencedLease, p *corev1.Pod) int32 {
	s := specStartupSeconds(fl)
	if p != nil && grantorder.Warm(p) && p.Status.Phase == corev1.PodRunning {
		s = min(s, max(2*specDurationSeconds(fl), warmConfirmFloor))
	}
	return s
}

// warmConfirmFloor is the shortest confirmation bound of a running Warm standby, in
// seconds: room for a renewal's round trip on a loaded API server with a short lease.
const warmConfirmFloor = 10

// specHandoffSeconds is the hand-off grace period a request made now gets.
func specHandoffSeconds(fl *fencingv1.FencedLease) int32 {
	if s := fl.Spec.HandoffGracePeriodSeconds; s > 0 {
		return s
	}
	return 30
}

// startupDeadline is the startup deadline frozen into grant h.
func startupDeadline(h *fencingv1.Holder, fl *fencingv1.FencedLease) time.Duration {
	s := h.StartupDeadlineSeconds
	if s <= 0 {
		s = specStartupSeconds(fl)
	}
	return time.Duration(s) * time.Second
}

// grantDuration is the duration frozen into grant h; a grant recorded before durations
// were frozen falls back to the spec.
func grantDuration(h *fencingv1.Holder, fl *fencingv1.FencedLease) time.Duration {
	s := h.LeaseDurationSeconds
	if s <= 0 {
		s = specDurationSeconds(fl)
	}
	return time.Duration(s) * time.Second
}

// microTime drops the monotonic reading and what the API would not store, so a status
// decided twice from the same observation compares equal.
func microTime(t time.Time) *metav1.MicroTime {
	m := metav1.NewMicroTime(t.Round(0).Truncate(time.Microsecond))
	return &m
}

// revocationDelay is the lock-delay a revocation for reason made now gets: the spec's,
// for an involuntary one — the holder may still be acting — and none for a pod that never
// started, or a FencedLease going away.
func revocationDelay(fl *fencingv1.FencedLease, reason fencingv1.RevocationReason) int32 {
	switch reason {
	case fencingv1.ReasonPodCannotStart, fencingv1.ReasonFencedLeaseDeleted:
		return 0
	}
	return fl.Spec.RevocationDelaySeconds
}

// revocationDelayLeft is what remains of the lock-delay of the last revocation in st (X8):
// from when this process revoked, or — a process that took over since — from its first
// look, on its own clock; decidedNow is a revocation this very decision made.
func revocationDelayLeft(w world, st *fencingv1.FencedLeaseStatus, decidedNow *fencingv1.Revocation) time.Duration {
	rv := st.LastRevocation
	if rv == nil || rv.DelaySeconds <= 0 {
		return 0
	}
	since := w.delaySince
	if decidedNow != nil || since.IsZero() {
		since = w.now
	}
	return since.Add(time.Duration(rv.DelaySeconds) * time.Second).Sub(w.now)
}

// truncate cuts s to at most n bytes, on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
