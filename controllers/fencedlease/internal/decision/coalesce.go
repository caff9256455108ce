package decision

import (
	"time"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// StatusCoalesce is how long the status write after a hand-over, or after a grant on an
// idle FencedLease, waits for the new holder's first renewal, so that one write records
// the revocation (if any), the grant and the first renewal (X4, G4 with R2). The Lease
// already holds the grant, so the wait is off everyone's way but a status reader's:
// `kubectl get fl` names the new holder up to this late. A Warm holder, or pkg/holder
// started on the grant, renews at once.
const StatusCoalesce = 2 * time.Second

// CoalesceWindow is StatusCoalesce, but never more than half the new grant's lease, so
// a short lease's status is never a whole lease behind.
func CoalesceWindow(h *fencingv1.Holder, fl *fencingv1.FencedLease) time.Duration {
	return min(StatusCoalesce, GrantDuration(h, fl)/2)
}

// deferStatus decides whether the status write of decision d waits (X4, G4): only for a
// grant the Lease holds already — handed over in this decision's compare-and-swap,
// granted on an idle FencedLease's Lease in this decision (G2), or written so by this
// process earlier and adopted off the Lease now (adoptRule) — that has not renewed yet,
// within CoalesceWindow of that Lease write on this process's clock.
// A process that did not write it (restarted, or a new leader) records it at once,
// as it does a deleted FencedLease. adopted says which kind of grant d makes.
func (d *Decision) deferStatus(w World, in *Input, adopted bool) {
	g := d.Grant
	if g == nil || w.FL.DeletionTimestamp != nil || d.Status.Holder == nil || d.Status.Holder.FirstRenewTime != nil {
		return
	}
	var since time.Time
	switch {
	case adopted && !in.Held.Revoking.handedOverAt.IsZero():
		since = in.Held.Revoking.handedOverAt
	case adopted:
		since = w.GrantedOnLeaseAt
	case d.handsOver(), d.GrantOnLease:
		since = w.Now
	}
	if since.IsZero() {
		return
	}
	if left := since.Add(CoalesceWindow(&g.Holder, w.FL)).Sub(w.Now); left > 0 {
		d.StatusWait = left
		d.RequeueAfter = left
	}
}
