package fencedlease

import (
	"k8s.io/utils/ptr"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// planFor lists the writes that carry out decision d, taken on world w.
func planFor(w world, d decision) plan {
	var p plan
	ours := !d.foreignLease // a foreign Lease is never written (A3)
	if d.leaseFirst() && ours {
		p.add(cutLease, "X3")
		if d.cutOffOnRequest() || d.cutsOff(fencingv1.ReasonPodCannotRun) {
			p.add(tellCutOff, "Q2")
		}
	}
	if d.statusWait == 0 {
		// The status write drops a grant that ended: its pod first, so one whose label
		// was taken off is never left marked Holding, found by nothing.
		switch {
		case d.ended(revoke) != nil:
			p.add(demoteEnded, "X5")
		case d.ended(release) != nil:
			p.add(demoteEnded, "L3")
		}
		// Otherwise the Lease holds the grant: the pods follow it now, and the status
		// records it with the first renewal, or when the wait is over (deferStatus, G4).
		p.add(writeStatus, "X4")
	}
	if ours {
		p.add(writeLease, "G2")
	}
	if (d.handsOver() || d.grantOnLease) && d.statusWait > 0 {
		// The Lease is the new grant's first record: a Warm holder starts on it. A Cold
		// one starts only once its pod is patched (G3): that, and the demotions before it,
		// come now; the rest — a Warm holder's pods, a revoked pod's deletion — follows in
		// a pass of its own, behind every other Lease that must move now (P1), which
		// adopts the grant off the Lease. The echo of the last write brings it back; the
		// requeue is a fallback.
		if !startsOnLease(w, d.granted()) {
			p.add(demotePods, "X5")
			p.add(promoteHolder, "G3")
		}
		p.requeueAfter, p.priority = cacheBehind, ptr.To(followUpPriority)
		return p
	}
	p.add(demotePods, "X5")
	p.add(promoteHolder, "G3")
	p.add(deleteRevoked, "X6")
	switch deleting := w.fl.DeletionTimestamp != nil; {
	case deleting && (d.status.Holder != nil || w.slot.othersHeld):
		// A holder still stands, or a grant only the Lease recorded was adopted just now:
		// its pod may be at work, so it is revoked (D1) before the FencedLease goes. So
		// is every other slot's.
		p.requeueAfter = conflictRetry
	case deleting:
		// No holder remains, and the Lease keeps the high-water token: let it go.
		p.add(releaseFinalizer, "D1")
	case d.statusWait > 0:
		// Only the status write is left, and it waits (G4): follow-up work.
		p.requeueAfter, p.priority = d.requeueAfter, ptr.To(followUpPriority)
	default:
		p.requeueAfter, p.priority = d.requeueAfter, ptr.To(normalPriority)
		p.settles = grantSettles(w.fl, d)
	}
	return p
}

// grantSettles is true when the pass keeps the grant with nothing of it left waiting for a
// renewal: the status records its first renewal, no hand-off was asked, no revocation is
// requested, the FencedLease is not being deleted; so only its expiry is due, on the timer
// this pass sets (keepRule), and its renewals need queue no pass (renewals.go).
func grantSettles(fl *fencingv1.FencedLease, d decision) bool {
	h := d.status.Holder
	return h != nil && d.end != nil && d.end.kind == keep && d.grant == nil && d.statusWait == 0 && d.requeueAfter > 0 &&
		h.FirstRenewTime != nil && h.Handoff == nil && fl.DeletionTimestamp == nil && !revokeRequestedFor(fl, h)
}
