package decision

import (
	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/internal/grantorder"
)

// planFor lists the writes that carry out decision d, taken on world w.
func planFor(w World, d Decision) Plan {
	var p Plan
	ours := !d.foreignLease // a foreign Lease is never written (A3)
	if d.leaseFirst() && ours {
		p.add(CutLease, "X3")
		if d.CutOffOnRequest() || d.cutsOff(fencingv1.ReasonPodCannotRun) {
			p.add(TellCutOff, "Q2")
		}
	}
	if d.StatusWait == 0 {
		// The status write drops a grant that ended: its pod first, so one whose label
		// was taken off is never left marked Holding, found by nothing.
		switch {
		case d.Ended(Revoke) != nil:
			p.add(DemoteEnded, "X5")
		case d.Ended(Release) != nil:
			p.add(DemoteEnded, "L3")
		}
		// Otherwise the Lease holds the grant: the pods follow it now, and the status
		// records it with the first renewal, or when the wait is over (deferStatus, G4).
		p.add(WriteStatus, "X4")
	}
	if ours {
		p.add(WriteLease, "G2")
	}
	if (d.handsOver() || d.GrantOnLease) && d.StatusWait > 0 {
		// The Lease is the new grant's first record: a Warm holder starts on it. A Cold
		// one starts only once its pod is patched (G3): that, and the demotions before it,
		// come now; the rest — a Warm holder's pods, a revoked pod's deletion — follows in
		// a pass of its own, behind every other Lease that must move now (P1), which
		// adopts the grant off the Lease. The echo of the last write brings it back; the
		// requeue is a fallback.
		if !startsOnLease(w, d.Granted()) {
			p.add(DemotePods, "X5")
			p.add(PromoteHolder, "G3")
		}
		p.RequeueAfter, p.Priority = CacheBehind, RequeueFollowUp
		return p
	}
	p.add(DemotePods, "X5")
	p.add(PromoteHolder, "G3")
	p.add(DeleteRevoked, "X6")
	switch deleting := w.Fl.DeletionTimestamp != nil; {
	case deleting && (d.Status.Holder != nil || w.Slot.othersHeld):
		// A holder still stands, or a grant only the Lease recorded was adopted just now:
		// its pod may be at work, so it is revoked (D1) before the FencedLease goes. So
		// is every other slot's.
		p.RequeueAfter = ConflictRetry
	case deleting:
		// No holder remains, and the Lease keeps the high-water token: let it go.
		p.add(ReleaseFinalizer, "D1")
	case d.StatusWait > 0:
		// Only the status write is left, and it waits (G4): follow-up work.
		p.RequeueAfter, p.Priority = d.RequeueAfter, RequeueFollowUp
	default:
		p.RequeueAfter, p.Priority = d.RequeueAfter, RequeueNormal
		p.Settles = GrantSettles(w.Fl, d)
	}
	return p
}

// GrantSettles is true when the pass keeps the grant with nothing of it left waiting for a
// renewal: the status records its first renewal, no hand-off was asked, no revocation is
// requested, the FencedLease is not being deleted; so only its expiry is due, on the timer
// this pass sets (KeepRule), and its renewals need queue no pass (renewals.go).
func GrantSettles(fl *fencingv1.FencedLease, d Decision) bool {
	h := d.Status.Holder
	return h != nil && d.End != nil && d.End.Kind == Keep && d.Grant == nil && d.StatusWait == 0 && d.RequeueAfter > 0 &&
		h.FirstRenewTime != nil && h.Handoff == nil && fl.DeletionTimestamp == nil && !revokeRequestedFor(fl, h)
}

// startsOnLease is true when holder h's pod is a Warm standby: running already, it starts
// on the Lease (G2), so its pod write is follow-up work. A Cold pod starts only when its
// pod is patched (G3), and a pod not found is taken for Cold.
func startsOnLease(w World, h *fencingv1.Holder) bool {
	if h == nil {
		return false
	}
	p := FindPod(w.Pods, h.PodUID)
	return p != nil && grantorder.Warm(p)
}
