package decision

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
	applies func(in *Input) (Transition, bool)
}

// chain is a list of rules; the first that applies decides.
type chain []rule

// Evaluate returns the transition of the first rule that applies, named after it.
func (c chain) Evaluate(in *Input) (Transition, bool) {
	for _, r := range c {
		if t, ok := r.applies(in); ok {
			t.RuleName = r.name
			t.Holder = *in.H
			return t, true
		}
	}
	return Transition{}, false
}

// HolderRules judge the grant the status names, in this order (doc.go gives the steps
// they cite). The last one always applies.
var HolderRules = chain{
	{"foreign Lease", ForeignLeaseRule},
	{"finish a half-done revocation", FinishRevocationRule},
	{"cannot start", CannotStartRule},
	{"released", ReleasedRule},
	{"deleting", DeletingRule},
	{"cut off, waiting out the lease", CutOffRunsOutRule},
	{"label removed", LabelRemovedRule},
	{"expired", ExpiredRule},
	{"cannot run", CannotRunRule},
	{"revoke requested", RevokeRequestedRule},
	{"hand-off withdrawn", HandoffWithdrawnRule},
	{"hand-off timeout", HandoffTimeoutRule},
	{"slot removed", SlotRemovedRule},
	{"ask to hand off", AskHandoffRule},
	{"keep", KeepRule},
}

// ForeignLeaseRule: a Lease of this name that the operator did not create is never
// adopted or written (A3). A deleted FencedLease still revokes its holder, so deletion is
// never blocked; otherwise the grant is kept as the status has it.
func ForeignLeaseRule(in *Input) (Transition, bool) {
	if in.State != leaserecord.StateForeign {
		return Transition{}, false
	}
	if in.FL.DeletionTimestamp != nil {
		return Transition{Kind: Revoke, Revocation: fencingv1.ReasonFencedLeaseDeleted}, true
	}
	return Transition{Kind: Keep, RequeueAfter: ConflictRecheck}, true
}

// FinishRevocationRule: the Lease shows this grant cut off (X3 done), or already handed
// over to the next grant (X3 with G2), and the status does not record the revocation (X4
// failed: a conflict, a crash). Finish it with the reason it was decided for — this
// process remembers it (with its lateness) until X4 lands; a restarted one reads it off
// the Lease, which records the reason of a revocation it cleared; a hand-over (or an
// older operator's clear) it did not make on purpose (no hand-off asked, no revoke
// requested) can only be an expiry.
func FinishRevocationRule(in *Input) (Transition, bool) {
	if in.State != leaserecord.StateCutOff && !in.handedOver {
		return Transition{}, false
	}
	if p := in.Held.Revoking; p.Reason != "" {
		return Transition{Kind: Revoke, Revocation: p.Reason, Message: p.message, Lateness: p.Lateness, at: p.At}, true
	}
	if reason, ok := revokedOnLease(in.Record); ok && in.State == leaserecord.StateCutOff {
		return Transition{Kind: Revoke, Revocation: reason}, true
	}
	if in.handedOver && in.revokeRequested {
		return Transition{Kind: Revoke, Revocation: fencingv1.ReasonRevokeRequested}, true
	}
	if in.handedOver {
		return Transition{Kind: Revoke, Revocation: ExpiryReason(in.Started, false)}, true
	}
	if WaitingOutCutOff(in.Record, in.FL, in.H) {
		if in.Holder != nil && grantorder.PodState(in.Holder) == fencingv1.PodRevoked && endedOnPod(in.Holder, in.H.Token) {
			// Its revocation was decided before a crash: the pod is marked (X5). Finish it
			// now; waiting the lease out again would mark the pod Holding again. (A pod
			// marked Released is gone or finished: ReleasedRule judges it again.)
			return cutOffRevocation(in), true
		}
		return Transition{}, false // cut off on purpose (C1): CutOffRunsOutRule
	}
	return Transition{Kind: Revoke, Revocation: ExpiryReason(in.Started, false)}, true
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

// CannotStartRule: before its first renewal the holder pod reports that it cannot start
// — a container in an image pull back-off or crash loop, a bad container config, phase
// Failed, or unschedulable for UnschedulableBound (X7). Waiting out the startup deadline
// would only keep the next candidate waiting: revoke now. A renewal sent meanwhile would
// make the pod started, so the Lease is cleared first and such a renewal wins.
func CannotStartRule(in *Input) (Transition, bool) {
	if in.cannotStart == "" {
		return Transition{}, false
	}
	return Transition{Kind: Revoke, Revocation: fencingv1.ReasonPodCannotStart, Message: in.cannotStart, LeaseFirst: true}, true
}

// ReleasedRule: the holder pod finished or is gone, or the holder cleared holderIdentity
// on its own Lease (L1, L2). A terminating pod keeps its grant until it is gone: its
// containers may still run.
func ReleasedRule(in *Input) (Transition, bool) {
	var reason fencingv1.ReleaseReason
	switch pod := in.Holder; {
	case pod == nil:
		reason = fencingv1.ReleasePodDeleted
	case grantorder.Finished(pod):
		reason = fencingv1.ReleasePodFinished
	case in.State == leaserecord.StateReleased:
		reason = fencingv1.ReleaseLeaseReleased
	default:
		return Transition{}, false
	}
	return Transition{Kind: Release, Release: reason}, true
}

// CutOffRunsOutRule: the holder stands cut off (C1: a hand-off grace period ended, or a
// revoke was requested). It is revoked once the lease it last renewed has run out, so a
// holder that keeps its own deadline has stopped by then (C2) — or at once when it never
// renewed: it never ran.
func CutOffRunsOutRule(in *Input) (Transition, bool) {
	switch {
	case in.State != leaserecord.StateCutOff:
		return Transition{}, false
	case in.revokeRequested && !in.Started:
		return Transition{Kind: Revoke, Revocation: fencingv1.ReasonRevokeRequested}, true
	case in.left > 0:
		return Transition{Kind: Keep, RequeueAfter: in.left}, true
	}
	return cutOffRevocation(in), true
}

// cutOffRevocation is the revocation of a holder cut off on purpose, for the reason it
// was cut off for.
func cutOffRevocation(in *Input) Transition {
	switch {
	case in.revokeRequested:
		return Transition{Kind: Revoke, Revocation: fencingv1.ReasonRevokeRequested}
	case cutOffFor(in.Record, fencingv1.ReasonPodCannotRun):
		return Transition{Kind: Revoke, Revocation: fencingv1.ReasonPodCannotRun, Message: cannotRunMessage(in)}
	}
	return Transition{Kind: Revoke, Revocation: ExpiryReason(in.Started, true)}
}

// DeletingRule: a FencedLease being deleted revokes its holder (D1) — one standing cut
// off too, at once as any holder: the finalizer goes only once no holder remains.
func DeletingRule(in *Input) (Transition, bool) {
	if in.FL.DeletionTimestamp == nil {
		return Transition{}, false
	}
	return Transition{Kind: Revoke, Revocation: fencingv1.ReasonFencedLeaseDeleted}, true
}

// LabelRemovedRule: the holder pod is still there, maybe running, without the label that
// made it a candidate: not a release. Revoke it (A2).
func LabelRemovedRule(in *Input) (Transition, bool) {
	if in.Holder.Labels[fencingv1.LeaseLabel] == in.FL.Name {
		return Transition{}, false
	}
	return Transition{Kind: Revoke, Revocation: fencingv1.ReasonLabelRemoved}, true
}

// ExpiredRule: no renewal observed for the grant's limit — the startup deadline until it
// first renewed, its lease duration after (X2). The Lease is cleared first (X3).
func ExpiredRule(in *Input) (Transition, bool) {
	if in.left > 0 {
		return Transition{}, false
	}
	return Transition{Kind: Revoke, LeaseFirst: true, Lateness: lateBy(in.World, in.limit, -in.left),
		Revocation: ExpiryReason(in.Started, in.H.Handoff != nil && in.graceLeft <= 0)}, true
}

// CannotRunRule: after its first renewal, a container of the holder pod reports that it
// cannot run — a crash loop (repeated OOM kills too), a config that broke since (X9) —
// while the pod renews (its agent sidecar does, whatever the workload does). Waiting for
// the lease to run out would keep a grant that does no work for as long as the sidecar
// lives: cut it off now (C1, the Lease records why) and revoke it as PodCannotRun when
// its lease has run out (C2).
func CannotRunRule(in *Input) (Transition, bool) {
	if in.cannotRun == "" {
		return Transition{}, false
	}
	return Transition{Kind: CutOff, Revocation: fencingv1.ReasonPodCannotRun, Message: in.cannotRun, LeaseFirst: true, RequeueAfter: in.left}, true
}

// cannotRunMessage is what the holder pod reports now, or — its container restarted again
// after a back-off — how that container last ended.
func cannotRunMessage(in *Input) string {
	switch {
	case in.cannotRun != "":
		return in.cannotRun
	case in.lastCrash != "":
		return in.lastCrash
	}
	return "a container could not run when the holder was cut off"
}

// RevokeRequestedRule: the FencedLease asks to revoke exactly this grant (Q1). One that
// never renewed never ran, and the compare-and-swap refuses the first renewal it may be
// sending: revoke at once. Otherwise cut it off now (Q2) and revoke when its lease has run
// out (C2).
func RevokeRequestedRule(in *Input) (Transition, bool) {
	switch {
	case !in.revokeRequested:
		return Transition{}, false
	case !in.Started:
		return Transition{Kind: Revoke, Revocation: fencingv1.ReasonRevokeRequested, LeaseFirst: true}, true
	}
	return Transition{Kind: CutOff, Revocation: fencingv1.ReasonRevokeRequested, LeaseFirst: true, RequeueAfter: in.left}, true
}

// HandoffTimeoutRule: asked to hand off, the holder did not release within the grace
// period: cut it off (H3, C1).
func HandoffTimeoutRule(in *Input) (Transition, bool) {
	if in.H.Handoff == nil || in.graceLeft > 0 {
		return Transition{}, false
	}
	return Transition{Kind: CutOff, Revocation: fencingv1.ReasonHandoffTimeout, LeaseFirst: true, RequeueAfter: in.left}, true
}

// HandoffWithdrawnRule: the successor a hand-off named no longer waits — deleted by a
// rollback or a user — before the holder released or the grace period ended: the request
// is withdrawn, and the holder keeps its grant (H5) instead of being cut off for a
// successor that will never come. A newer one, if one waits, is asked for anew.
func HandoffWithdrawnRule(in *Input) (Transition, bool) {
	if in.H.Handoff == nil || in.graceLeft <= 0 {
		return Transition{}, false
	}
	if removed := in.H.Handoff.SuccessorUID == ""; removed && in.Slot.Retired || !removed && successorWaits(in.PodOf(in.H.Handoff.SuccessorUID)) {
		return Transition{}, false // its slot was removed and still is, or its successor waits
	}
	return Transition{Kind: WithdrawHandoff, RequeueAfter: in.left}, true
}

// SlotRemovedRule: lowering spec.holders removed the holder's slot: ask it to hand off
// (H1) with no successor — none follows in this slot — so it releases at a safe point
// within the grace period, or is cut off when that ends (H3). Raising spec.holders again
// before then withdraws the request (H5).
func SlotRemovedRule(in *Input) (Transition, bool) {
	if !in.Slot.Retired || in.H.Handoff != nil {
		return Transition{}, false
	}
	grace := time.Duration(specHandoffSeconds(in.FL)) * time.Second
	return Transition{Kind: AskHandoff, RequeueAfter: min(in.left, grace), Successor: &fencingv1.Handoff{
		SuccessorName:      fencingv1.SlotRemovedSuccessor,
		RequestTime:        *MicroTime(in.Now),
		GracePeriodSeconds: specHandoffSeconds(in.FL),
	}}, true
}

// AskHandoffRule: a Cold pod of a newer revision of the holder's own workload waits: ask
// the holder to hand off to it (H1), once the holder has started (renewed): one that has
// not cannot release, and a grace period that ran while its pod was still starting would
// cut it off before it ever worked — over and over while a rollout to an image that
// cannot start stalls. The grace period starts at now. A Warm successor is never asked
// for: it is scheduled and Ready by its own probes, so the rollout goes on and the
// workload controller ends the holder itself; the next grant goes to that successor all
// the same (H4).
func AskHandoffRule(in *Input) (Transition, bool) {
	if in.H.Handoff != nil || in.Successor == nil || grantorder.Warm(in.Successor) || !in.Started {
		return Transition{}, false
	}
	grace := time.Duration(specHandoffSeconds(in.FL)) * time.Second
	return Transition{Kind: AskHandoff, RequeueAfter: min(in.left, grace), Successor: &fencingv1.Handoff{
		SuccessorName:      in.Successor.Name,
		SuccessorUID:       in.Successor.UID,
		RequestTime:        *MicroTime(in.Now),
		GracePeriodSeconds: specHandoffSeconds(in.FL),
	}}, true
}

// KeepRule: the grant holds; look again when it could next run out.
func KeepRule(in *Input) (Transition, bool) {
	next := in.left
	if in.H.Handoff != nil {
		next = min(next, in.graceLeft)
	}
	if in.unschedulableLeft > 0 {
		next = min(next, in.unschedulableLeft)
	}
	return Transition{Kind: Keep, RequeueAfter: next}, true
}

// ExpiryReason names a revocation decided by the clock. One that never renewed never ran,
// whatever else happened: its pod must go (see mustDelete).
func ExpiryReason(started, handoffTimedOut bool) fencingv1.RevocationReason {
	switch {
	case !started:
		return fencingv1.ReasonStartupDeadlineExceeded
	case handoffTimedOut:
		return fencingv1.ReasonHandoffTimeout
	}
	return fencingv1.ReasonLeaseExpired
}
