package fencedlease

import (
	"time"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/internal/grantorder"
	"github.com/fencedlease/fencedlease/pkg/leaserecord"
)

// rule judges the grant the status names from the classified world: it returns its
// transition and true, or false when it does not apply. Rules are pure.
type rule struct {
	name    string
	applies func(in *input) (transition, bool)
}

// chain is a list of rules; the first that applies decides.
type chain []rule

// evaluate returns the transition of the first rule that applies, named after it.
func (c chain) evaluate(in *input) (transition, bool) {
	for _, r := range c {
		if t, ok := r.applies(in); ok {
			t.ruleName = r.name
			t.holder = *in.h
			return t, true
		}
	}
	return transition{}, false
}

// holderRules judge the grant the status names, in this order (doc.go gives the steps
// they cite). The last one always applies.
var holderRules = chain{
	{"foreign Lease", foreignLeaseRule},
	{"finish a half-done revocation", finishRevocationRule},
	{"cannot start", cannotStartRule},
	{"released", releasedRule},
	{"deleting", deletingRule},
	{"cut off, waiting out the lease", cutOffRunsOutRule},
	{"label removed", labelRemovedRule},
	{"expired", expiredRule},
	{"cannot run", cannotRunRule},
	{"revoke requested", revokeRequestedRule},
	{"hand-off withdrawn", handoffWithdrawnRule},
	{"hand-off timeout", handoffTimeoutRule},
	{"slot removed", slotRemovedRule},
	{"ask to hand off", askHandoffRule},
	{"keep", keepRule},
}

// foreignLeaseRule: a Lease of this name that the operator did not create is never
// adopted or written (A3). A deleted FencedLease still revokes its holder, so deletion is
// never blocked; otherwise the grant is kept as the status has it.
func foreignLeaseRule(in *input) (transition, bool) {
	if in.state != leaserecord.StateForeign {
		return transition{}, false
	}
	if in.fl.DeletionTimestamp != nil {
		return transition{kind: revoke, revocation: fencingv1.ReasonFencedLeaseDeleted}, true
	}
	return transition{kind: keep, requeueAfter: conflictRecheck}, true
}

// finishRevocationRule: the Lease shows this grant cut off (X3 done), or already handed
// over to the next grant (X3 with G2), and the status does not record the revocation (X4
// failed: a conflict, a crash). Finish it with the reason it was decided for — this
// process remembers it (with its lateness) until X4 lands; a restarted one reads it off
// the Lease, which records the reason of a revocation it cleared; a hand-over (or an
// older operator's clear) it did not make on purpose (no hand-off asked, no revoke
// requested) can only be an expiry.
func finishRevocationRule(in *input) (transition, bool) {
	if in.state != leaserecord.StateCutOff && !in.handedOver {
		return transition{}, false
	}
	if p := in.held.revoking; p.reason != "" {
		return transition{kind: revoke, revocation: p.reason, message: p.message, lateness: p.lateness, at: p.at}, true
	}
	if reason, ok := revokedOnLease(in.record); ok && in.state == leaserecord.StateCutOff {
		return transition{kind: revoke, revocation: reason}, true
	}
	if in.handedOver && in.revokeRequested {
		return transition{kind: revoke, revocation: fencingv1.ReasonRevokeRequested}, true
	}
	if in.handedOver {
		return transition{kind: revoke, revocation: expiryReason(in.started, false)}, true
	}
	if waitingOutCutOff(in.record, in.fl, in.h) {
		if in.holder != nil && grantorder.PodState(in.holder) == fencingv1.PodRevoked && endedOnPod(in.holder, in.h.Token) {
			// Its revocation was decided before a crash: the pod is marked (X5). Finish it
			// now; waiting the lease out again would mark the pod Holding again. (A pod
			// marked Released is gone or finished: releasedRule judges it again.)
			return cutOffRevocation(in), true
		}
		return transition{}, false // cut off on purpose (C1): cutOffRunsOutRule
	}
	return transition{kind: revoke, revocation: expiryReason(in.started, false)}, true
}

// revokedOnLease is the reason of a revocation the Lease records as done (X3: written with
// the clear of its holder), as opposed to a cut-off still waiting out the lease (C1:
// PodCannotRun). Only the operator's own reasons count: a Lease's annotations are no
// user's to set.
func revokedOnLease(rec leaserecord.Record) (fencingv1.RevocationReason, bool) {
	switch r := fencingv1.RevocationReason(rec.CutOffReason); r {
	case fencingv1.ReasonLeaseExpired, fencingv1.ReasonStartupDeadlineExceeded, fencingv1.ReasonHandoffTimeout,
		fencingv1.ReasonLabelRemoved, fencingv1.ReasonFencedLeaseDeleted, fencingv1.ReasonRevokeRequested, fencingv1.ReasonPodCannotStart:
		return r, true
	}
	return "", false
}

// cannotStartRule: before its first renewal the holder pod reports that it cannot start
// — a container in an image pull back-off or crash loop, a bad container config, phase
// Failed, or unschedulable for unschedulableBound (X7). Waiting out the startup deadline
// would only keep the next candidate waiting: revoke now. A renewal sent meanwhile would
// make the pod started, so the Lease is cleared first and such a renewal wins.
func cannotStartRule(in *input) (transition, bool) {
	if in.cannotStart == "" {
		return transition{}, false
	}
	return transition{kind: revoke, revocation: fencingv1.ReasonPodCannotStart, message: in.cannotStart, leaseFirst: true}, true
}

// releasedRule: the holder pod finished or is gone, or the holder cleared holderIdentity
// on its own Lease (L1, L2). A terminating pod keeps its grant until it is gone: its
// containers may still run.
func releasedRule(in *input) (transition, bool) {
	var reason fencingv1.ReleaseReason
	switch pod := in.holder; {
	case pod == nil:
		reason = fencingv1.ReleasePodDeleted
	case grantorder.Finished(pod):
		reason = fencingv1.ReleasePodFinished
	case in.state == leaserecord.StateReleased:
		reason = fencingv1.ReleaseLeaseReleased
	default:
		return transition{}, false
	}
	return transition{kind: release, release: reason}, true
}

// cutOffRunsOutRule: the holder stands cut off (C1: a hand-off grace period ended, or a
// revoke was requested). It is revoked once the lease it last renewed has run out, so a
// holder that keeps its own deadline has stopped by then (C2) — or at once when it never
// renewed: it never ran.
func cutOffRunsOutRule(in *input) (transition, bool) {
	switch {
	case in.state != leaserecord.StateCutOff:
		return transition{}, false
	case in.revokeRequested && !in.started:
		return transition{kind: revoke, revocation: fencingv1.ReasonRevokeRequested}, true
	case in.left > 0:
		return transition{kind: keep, requeueAfter: in.left}, true
	}
	return cutOffRevocation(in), true
}

// cutOffRevocation is the revocation of a holder cut off on purpose, for the reason it
// was cut off for.
func cutOffRevocation(in *input) transition {
	switch {
	case in.revokeRequested:
		return transition{kind: revoke, revocation: fencingv1.ReasonRevokeRequested}
	case cutOffFor(in.record, fencingv1.ReasonPodCannotRun):
		return transition{kind: revoke, revocation: fencingv1.ReasonPodCannotRun, message: cannotRunMessage(in)}
	}
	return transition{kind: revoke, revocation: expiryReason(in.started, true)}
}

// deletingRule: a FencedLease being deleted revokes its holder (D1) — one standing cut
// off too, at once as any holder: the finalizer goes only once no holder remains.
func deletingRule(in *input) (transition, bool) {
	if in.fl.DeletionTimestamp == nil {
		return transition{}, false
	}
	return transition{kind: revoke, revocation: fencingv1.ReasonFencedLeaseDeleted}, true
}

// labelRemovedRule: the holder pod is still there, maybe running, without the label that
// made it a candidate: not a release. Revoke it (A2).
func labelRemovedRule(in *input) (transition, bool) {
	if in.holder.Labels[fencingv1.LeaseLabel] == in.fl.Name {
		return transition{}, false
	}
	return transition{kind: revoke, revocation: fencingv1.ReasonLabelRemoved}, true
}

// expiredRule: no renewal observed for the grant's limit — the startup deadline until it
// first renewed, its lease duration after (X2). The Lease is cleared first (X3).
func expiredRule(in *input) (transition, bool) {
	if in.left > 0 {
		return transition{}, false
	}
	return transition{kind: revoke, leaseFirst: true, lateness: lateBy(in.world, in.limit, -in.left),
		revocation: expiryReason(in.started, in.h.Handoff != nil && in.graceLeft <= 0)}, true
}

// cannotRunRule: after its first renewal, a container of the holder pod reports that it
// cannot run — a crash loop (repeated OOM kills too), a config that broke since (X9) —
// while the pod renews (its agent sidecar does, whatever the workload does). Waiting for
// the lease to run out would keep a grant that does no work for as long as the sidecar
// lives: cut it off now (C1, the Lease records why) and revoke it as PodCannotRun when
// its lease has run out (C2).
func cannotRunRule(in *input) (transition, bool) {
	if in.cannotRun == "" {
		return transition{}, false
	}
	return transition{kind: cutOff, revocation: fencingv1.ReasonPodCannotRun, message: in.cannotRun, leaseFirst: true, requeueAfter: in.left}, true
}

// cannotRunMessage is what the holder pod reports now, or — its container restarted again
// after a back-off — how that container last ended.
func cannotRunMessage(in *input) string {
	switch {
	case in.cannotRun != "":
		return in.cannotRun
	case in.lastCrash != "":
		return in.lastCrash
	}
	return "a container could not run when the holder was cut off"
}

// revokeRequestedRule: the FencedLease asks to revoke exactly this grant (Q1). One that
// never renewed never ran, and the compare-and-swap refuses the first renewal it may be
// sending: revoke at once. Otherwise cut it off now (Q2) and revoke when its lease has run
// out (C2).
func revokeRequestedRule(in *input) (transition, bool) {
	switch {
	case !in.revokeRequested:
		return transition{}, false
	case !in.started:
		return transition{kind: revoke, revocation: fencingv1.ReasonRevokeRequested, leaseFirst: true}, true
	}
	return transition{kind: cutOff, revocation: fencingv1.ReasonRevokeRequested, leaseFirst: true, requeueAfter: in.left}, true
}

// handoffTimeoutRule: asked to hand off, the holder did not release within the grace
// period: cut it off (H3, C1).
func handoffTimeoutRule(in *input) (transition, bool) {
	if in.h.Handoff == nil || in.graceLeft > 0 {
		return transition{}, false
	}
	return transition{kind: cutOff, revocation: fencingv1.ReasonHandoffTimeout, leaseFirst: true, requeueAfter: in.left}, true
}

// handoffWithdrawnRule: the successor a hand-off named no longer waits — deleted by a
// rollback or a user — before the holder released or the grace period ended: the request
// is withdrawn, and the holder keeps its grant (H5) instead of being cut off for a
// successor that will never come. A newer one, if one waits, is asked for anew.
func handoffWithdrawnRule(in *input) (transition, bool) {
	if in.h.Handoff == nil || in.graceLeft <= 0 {
		return transition{}, false
	}
	if removed := in.h.Handoff.SuccessorUID == ""; removed && in.slot.retired || !removed && successorWaits(in.pods, in.h.Handoff.SuccessorUID) {
		return transition{}, false // its slot was removed and still is, or its successor waits
	}
	return transition{kind: withdrawHandoff, requeueAfter: in.left}, true
}

// slotRemovedRule: lowering spec.holders removed the holder's slot: ask it to hand off
// (H1) with no successor — none follows in this slot — so it releases at a safe point
// within the grace period, or is cut off when that ends (H3). Raising spec.holders again
// before then withdraws the request (H5).
func slotRemovedRule(in *input) (transition, bool) {
	if !in.slot.retired || in.h.Handoff != nil {
		return transition{}, false
	}
	grace := time.Duration(specHandoffSeconds(in.fl)) * time.Second
	return transition{kind: askHandoff, requeueAfter: min(in.left, grace), successor: &fencingv1.Handoff{
		SuccessorName:      fencingv1.SlotRemovedSuccessor,
		RequestTime:        *microTime(in.now),
		GracePeriodSeconds: specHandoffSeconds(in.fl),
	}}, true
}

// askHandoffRule: a Cold pod of a newer revision of the holder's own workload waits: ask
// the holder to hand off to it (H1), once the holder has started (renewed): one that has
// not cannot release, and a grace period that ran while its pod was still starting would
// cut it off before it ever worked — over and over while a rollout to an image that
// cannot start stalls. The grace period starts at now. A Warm successor is never asked
// for: it is scheduled and Ready by its own probes, so the rollout goes on and the
// workload controller ends the holder itself; the next grant goes to that successor all
// the same (H4).
func askHandoffRule(in *input) (transition, bool) {
	if in.h.Handoff != nil || in.successor == nil || grantorder.Warm(in.successor) || !in.started {
		return transition{}, false
	}
	grace := time.Duration(specHandoffSeconds(in.fl)) * time.Second
	return transition{kind: askHandoff, requeueAfter: min(in.left, grace), successor: &fencingv1.Handoff{
		SuccessorName:      in.successor.Name,
		SuccessorUID:       in.successor.UID,
		RequestTime:        *microTime(in.now),
		GracePeriodSeconds: specHandoffSeconds(in.fl),
	}}, true
}

// keepRule: the grant holds; look again when it could next run out.
func keepRule(in *input) (transition, bool) {
	next := in.left
	if in.h.Handoff != nil {
		next = min(next, in.graceLeft)
	}
	if in.unschedulableLeft > 0 {
		next = min(next, in.unschedulableLeft)
	}
	return transition{kind: keep, requeueAfter: next}, true
}

// expiryReason names a revocation decided by the clock. One that never renewed never ran,
// whatever else happened: its pod must go (see mustDelete).
func expiryReason(started, handoffTimedOut bool) fencingv1.RevocationReason {
	switch {
	case !started:
		return fencingv1.ReasonStartupDeadlineExceeded
	case handoffTimedOut:
		return fencingv1.ReasonHandoffTimeout
	}
	return fencingv1.ReasonLeaseExpired
}
