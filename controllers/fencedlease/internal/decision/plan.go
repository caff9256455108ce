package decision

import (
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/internal/grantorder"
	"github.com/fencedlease/fencedlease/pkg/leaserecord"
)

// planFor lists the writes that carry out decision d, taken on world w.
func planFor(w World, d Decision) Plan {
	p := Plan{Now: d.now, Granted: d.Granted()}
	p.addRecords(w, d)
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
	switch deleting := w.FL.DeletionTimestamp != nil; {
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
		p.Settles = GrantSettles(w.FL, d)
	}
	return p
}

// addRecords adds the writes that record decision d: the cut on the Lease, the ended
// grant's pod, the status, the Lease.
func (p *Plan) addRecords(w World, d Decision) {
	ours := !d.foreignLease // a foreign Lease is never written (A3)
	if d.leaseFirst() && ours {
		cut := p.add(CutLease, "X3")
		cut.Lease, cut.Revoking = leaseCut(w, d), revocationBegun(d)
		if d.CutOffOnRequest() || d.cutsOff(fencingv1.ReasonPodCannotRun) {
			p.add(TellCutOff, "Q2").Event = cutOffEvent(w, d)
		}
	}
	if d.StatusWait == 0 {
		// The status write drops a grant that ended: its pod first, so one whose label
		// was taken off is never left marked Holding, found by nothing.
		switch {
		case d.Ended(Revoke) != nil:
			p.add(DemoteEnded, "X5").Pod = d.End.Holder.PodUID
		case d.Ended(Release) != nil:
			p.add(DemoteEnded, "L3").Pod = d.End.Holder.PodUID
		}
		// Otherwise the Lease holds the grant: the pods follow it now, and the status
		// records it with the first renewal, or when the wait is over (deferStatus, G4).
		status := p.add(WriteStatus, "X4")
		status.Status, status.RevokedAt, status.Told = &d.Status, revokedAt(d), toldBy(d, w.Slot)
	}
	if ours {
		lease := p.add(WriteLease, "G2")
		lease.Renewal, lease.FirstRecord = w.Held.Renewal, d.GrantOnLease && d.StatusWait > 0
	}
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
	p := w.PodOf(h.PodUID)
	return p != nil && grantorder.Warm(p)
}

// leaseCut is what the compare-and-swap on the Lease read writes to end the status's
// grant (X3, C1), so a renewal that landed since wins and the decision is made again.
// When the decision grants the next pod too, the same write names it (X3 with G2: the
// hand-over): its token is the status's next, and the Lease is its first record — a
// status write that fails after it is finished by the next pass, which adopts the grant
// off the Lease (adoptRule). nil when the grant never reached the Lease: nobody could
// renew it.
func leaseCut(w World, d Decision) *coordinationv1.Lease {
	if !d.LeaseShowsHolder {
		return nil
	}
	if d.Grant != nil {
		return LeaseShowing(w.FL, w.Slot, &d.Status, w.Lease, Renewal{})
	}
	var reason fencingv1.RevocationReason
	switch t := d.End; {
	case t != nil && t.Kind == CutOff && t.Revocation == fencingv1.ReasonPodCannotRun:
		// Only the Lease can say why this holder stands cut off (see WaitingOutCutOff).
		reason = t.Revocation
	case t != nil && t.Kind == Revoke:
		// Revoked here and now (X3): a restart before the status records it (X4) still
		// finishes it for this reason (finishRevocationRule).
		reason = t.Revocation
	}
	next := w.Lease.DeepCopy()
	leaserecord.CutOff(next, reason)
	return next
}

// cutOffEvent tells the user of the holder cut off on request or because its pod cannot
// run (Q2, X9): its renewals are refused from now on, and it is revoked when the lease it
// last renewed has run out.
func cutOffEvent(w World, d Decision) *Event {
	h := w.FL.Status.Holder
	left := d.RequeueAfter.Round(time.Millisecond)
	if d.CutOffOnRequest() {
		return &Event{Holder: *h, Type: corev1.EventTypeWarning, Reason: "RevokeRequested", Action: "Revoke", OnFencedLease: true, OnPod: true,
			Note: fmt.Sprintf("revoking token %d of pod %s as requested (%s): its renewals are refused from now on, and the next pod is granted once its lease has run out, in at most %v",
				h.Token, h.PodName, fencingv1.RevokeAnnotation, left)}
	}
	return &Event{Holder: *h, Type: corev1.EventTypeWarning, Reason: string(fencingv1.ReasonPodCannotRun), Action: "Revoke", OnFencedLease: true, OnPod: true,
		Note: fmt.Sprintf("revoking token %d of pod %s: %s; its renewals are refused from now on, and the next pod is granted once its lease has run out, in at most %v",
			h.Token, h.PodName, d.End.Message, left)}
}

// revocationBegun is the revocation a cut on the Lease begins (X3), nil when it revokes
// no one now (a cut-off, C1).
func revocationBegun(d Decision) *PendingRevocation {
	t := d.Ended(Revoke)
	if t == nil {
		return nil
	}
	rv := &PendingRevocation{Reason: t.Revocation, message: t.Message, Lateness: t.Lateness, At: d.now}
	if d.handsOver() {
		rv.handedOverAt = d.now
	}
	return rv
}

// revokedAt is when the revocation the status write records was decided: by this pass,
// or by an earlier one whose status write failed (finishRevocationRule). Zero without one.
func revokedAt(d Decision) time.Time {
	t := d.Ended(Revoke)
	switch {
	case t == nil:
		return time.Time{}
	case t.at.IsZero():
		return d.now
	}
	return t.at
}
