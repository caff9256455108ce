package fencedlease

import (
	"time"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// transitionKind is what a decision does to a grant.
type transitionKind string

const (
	// keep: the grant goes on; look again when it could next run out.
	keep transitionKind = "Keep"
	// grant: a new grant to the next candidate (G1–G4).
	grant transitionKind = "Grant"
	// release: the grant ended without fault (L1–L3).
	release transitionKind = "Release"
	// revoke: the grant is taken away (X1–X9).
	revoke transitionKind = "Revoke"
	// cutOff: the Lease stops naming the holder, which can renew no more; it is revoked
	// once the lease it last renewed has run out (C1–C2).
	cutOff transitionKind = "CutOff"
	// askHandoff: the holder is asked to hand off to a newer revision of its workload (H1).
	askHandoff transitionKind = "AskHandoff"
	// withdrawHandoff: the successor a hand-off named no longer waits; the holder keeps
	// its grant (H5).
	withdrawHandoff transitionKind = "WithdrawHandoff"
)

// transition is one rule's verdict on one grant.
type transition struct {
	kind transitionKind
	// ruleName names the rule that chose it, for tests and logs.
	ruleName string
	// holder is the grant concerned: the ending one, or the new one for grant.
	holder fencingv1.Holder
	// revocation is the reason of a revoke, or the one a cutOff will be revoked for.
	revocation fencingv1.RevocationReason
	// message says more about a revocation (PodCannotStart: what the pod reported).
	message string
	// release is the reason of a release.
	release fencingv1.ReleaseReason
	// leaseFirst: the Lease's holder must be cleared by a compare-and-swap on the version
	// read (X3, C1) before the status records anything, so a renewal that landed since
	// wins and the decision is made again.
	leaseFirst bool
	// lateness is how long after the exact expiry a revoke was decided (the metric).
	lateness time.Duration
	// at is when a revoke finished now was decided, by this process (zero: now).
	at time.Time
	// requeueAfter is when to look again (keep, cutOff, askHandoff); zero for none.
	requeueAfter time.Duration
	// successor is the pod askHandoff names; podCreated is when a granted pod was created.
	successor  *fencingv1.Handoff
	podCreated time.Time
}

// decision is the next status and the transitions that lead there: at most one for the
// grant the status named (end) and one new grant.
type decision struct {
	status fencingv1.FencedLeaseStatus
	end    *transition
	grant  *transition
	// requeueAfter is when to look again; zero when nothing is due.
	requeueAfter time.Duration
	now          time.Time
	// foreignLease: the Lease is not the operator's (A3); nothing may write it.
	foreignLease bool
	// statusWait > 0: the status write waits this long for the first renewal of a grant
	// the Lease holds already (deferStatus); the Lease and the pods follow status now.
	statusWait time.Duration
	// leaseShowsHolder: the Lease read names the grant the status names (pod, UID, token).
	leaseShowsHolder bool
	// grantOnLease: the grant goes to an idle FencedLease and the Lease is its first
	// record (G1, G2): created, or swapped on the version read, before the status.
	grantOnLease bool
	// plan is how the pass carries the decision out (plan.go).
	plan plan
}

// ended is the end transition when it is of kind k, else nil.
func (d decision) ended(k transitionKind) *transition {
	if d.end != nil && d.end.kind == k {
		return d.end
	}
	return nil
}

// revoked is the revocation this decision records, or nil.
func (d decision) revoked() *fencingv1.Revocation {
	if d.ended(revoke) == nil {
		return nil
	}
	return d.status.LastRevocation
}

// released is the release this decision records, or nil.
func (d decision) released() *transition { return d.ended(release) }

// granted is the new grant, or nil.
func (d decision) granted() *fencingv1.Holder {
	if d.grant == nil {
		return nil
	}
	return &d.grant.holder
}

// cutOff: this decision cuts the holder off (C1).
func (d decision) cutOff() bool { return d.ended(cutOff) != nil }

// cutsOff: this decision cuts the holder off, to be revoked for reason.
func (d decision) cutsOff(reason fencingv1.RevocationReason) bool {
	t := d.ended(cutOff)
	return t != nil && t.revocation == reason
}

// asked: this decision asks the holder to hand off, at now (H1).
func (d decision) asked() bool { return d.ended(askHandoff) != nil }

// revokeRequested: this decision cuts the holder off because a revoke was requested (Q2).
func (d decision) cutOffOnRequest() bool { return d.cutsOff(fencingv1.ReasonRevokeRequested) }

// revocationLateness is the revocation's lateness; zero without one.
func (d decision) revocationLateness() time.Duration {
	if t := d.ended(revoke); t != nil {
		return t.lateness
	}
	return 0
}

// leaseFirst: a transition of this decision clears the Lease before the status write.
func (d decision) leaseFirst() bool { return d.end != nil && d.end.leaseFirst }

// createsLease: this decision's first write is the grant's on the Lease (G2) — a
// creation when the Lease is not there, which fails if one exists.
func (d decision) createsLease() bool {
	return d.grantOnLease && d.statusWait > 0
}

// handsOver: this decision's compare-and-swap on the Lease ends the status's grant and
// names the next one (X3 with G2), because the Lease shows the grant that ends.
func (d decision) handsOver() bool {
	return d.leaseFirst() && d.grant != nil && d.leaseShowsHolder
}
