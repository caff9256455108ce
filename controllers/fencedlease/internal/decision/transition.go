package decision

import (
	"time"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// TransitionKind is what a decision does to a grant.
type TransitionKind string

const (
	// Keep: the grant goes on; look again when it could next run out.
	Keep TransitionKind = "Keep"
	// Grant: a new grant to the next candidate (G1–G4).
	Grant TransitionKind = "Grant"
	// Release: the grant ended without fault (L1–L3).
	Release TransitionKind = "Release"
	// Revoke: the grant is taken away (X1–X9).
	Revoke TransitionKind = "Revoke"
	// CutOff: the Lease stops naming the holder, which can renew no more; it is revoked
	// once the lease it last renewed has run out (C1–C2).
	CutOff TransitionKind = "CutOff"
	// AskHandoff: the holder is asked to hand off to a newer revision of its workload (H1).
	AskHandoff TransitionKind = "AskHandoff"
	// WithdrawHandoff: the successor a hand-off named no longer waits; the holder keeps
	// its grant (H5).
	WithdrawHandoff TransitionKind = "WithdrawHandoff"
)

// Transition is one rule's verdict on one grant.
type Transition struct {
	Kind TransitionKind
	// RuleName names the rule that chose it, for tests and logs.
	RuleName string
	// Holder is the grant concerned: the ending one, or the new one for grant.
	Holder fencingv1.Holder
	// Revocation is the reason of a revoke, or the one a CutOff will be revoked for.
	Revocation fencingv1.RevocationReason
	// Message says more about a revocation (PodCannotStart: what the pod reported).
	Message string
	// Release is the reason of a release.
	Release fencingv1.ReleaseReason
	// LeaseFirst: the Lease's holder must be cleared by a compare-and-swap on the version
	// read (X3, C1) before the status records anything, so a renewal that landed since
	// wins and the decision is made again.
	LeaseFirst bool
	// Lateness is how long after the exact expiry a revoke was decided (the metric).
	Lateness time.Duration
	// at is when a revoke finished now was decided, by this process (zero: now).
	at time.Time
	// RequeueAfter is when to look again (keep, CutOff, AskHandoff); zero for none.
	RequeueAfter time.Duration
	// Successor is the pod AskHandoff names; PodCreated is when a granted pod was created.
	Successor  *fencingv1.Handoff
	PodCreated time.Time
}

// Decision is the next status and the transitions that lead there: at most one for the
// grant the status named (end) and one new grant.
type Decision struct {
	Status fencingv1.FencedLeaseStatus
	End    *Transition
	Grant  *Transition
	// RequeueAfter is when to look again; zero when nothing is due.
	RequeueAfter time.Duration
	now          time.Time
	// foreignLease: the Lease is not the operator's (A3); nothing may write it.
	foreignLease bool
	// StatusWait > 0: the status write waits this long for the first renewal of a grant
	// the Lease holds already (deferStatus); the Lease and the pods follow status now.
	StatusWait time.Duration
	// LeaseShowsHolder: the Lease read names the grant the status names (pod, UID, token).
	LeaseShowsHolder bool
	// GrantOnLease: the grant goes to an idle FencedLease and the Lease is its first
	// record (G1, G2): created, or swapped on the version read, before the status.
	GrantOnLease bool
	// Plan is how the pass carries the decision out (plan.go).
	Plan Plan
}

// Ended is the end transition when it is of kind k, else nil.
func (d Decision) Ended(k TransitionKind) *Transition {
	if d.End != nil && d.End.Kind == k {
		return d.End
	}
	return nil
}

// Revoked is the revocation this decision records, or nil.
func (d Decision) Revoked() *fencingv1.Revocation {
	if d.Ended(Revoke) == nil {
		return nil
	}
	return d.Status.LastRevocation
}

// Released is the release this decision records, or nil.
func (d Decision) Released() *Transition { return d.Ended(Release) }

// Granted is the new grant, or nil.
func (d Decision) Granted() *fencingv1.Holder {
	if d.Grant == nil {
		return nil
	}
	return &d.Grant.Holder
}

// CutOff: this decision cuts the holder off (C1).
func (d Decision) CutOff() bool { return d.Ended(CutOff) != nil }

// cutsOff: this decision cuts the holder off, to be revoked for reason.
func (d Decision) cutsOff(reason fencingv1.RevocationReason) bool {
	t := d.Ended(CutOff)
	return t != nil && t.Revocation == reason
}

// Asked: this decision asks the holder to hand off, at now (H1).
func (d Decision) Asked() bool { return d.Ended(AskHandoff) != nil }

// revokeRequested: this decision cuts the holder off because a revoke was requested (Q2).
func (d Decision) CutOffOnRequest() bool { return d.cutsOff(fencingv1.ReasonRevokeRequested) }

// RevocationLateness is the revocation's lateness; zero without one.
func (d Decision) RevocationLateness() time.Duration {
	if t := d.Ended(Revoke); t != nil {
		return t.Lateness
	}
	return 0
}

// LeaseFirst: a transition of this decision clears the Lease before the status write.
func (d Decision) leaseFirst() bool { return d.End != nil && d.End.LeaseFirst }

// CreatesLease: this decision's first write is the grant's on the Lease (G2) — a
// creation when the Lease is not there, which fails if one exists.
func (d Decision) CreatesLease() bool {
	return d.GrantOnLease && d.StatusWait > 0
}

// handsOver: this decision's compare-and-swap on the Lease ends the status's grant and
// names the next one (X3 with G2), because the Lease shows the grant that ends.
func (d Decision) handsOver() bool {
	return d.leaseFirst() && d.Grant != nil && d.LeaseShowsHolder
}
