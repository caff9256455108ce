package decision

import (
	"time"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// Landed says which of a plan's writes took effect (a write that found nothing to change
// counts as landed).
type Landed struct {
	// LeaseCut: the compare-and-swap that ended the grant on the Lease (X3, C1).
	LeaseCut bool
	// Status: the status now records the decision.
	Status bool
	// Lease: the Lease now shows the status.
	Lease bool
	// All: every step of the plan.
	All bool
}

// Remember is what this process knows of the FencedLease's grants once a pass is over:
// what it observed, and what took effect of what it decided. It is the only writer of
// the grant memory in a pass; now is read after the writes. Records of grants nobody
// names any more — not the status, before or after, nor the Lease — are dropped.
func Remember(w World, d Decision, done Landed, now time.Time) Recall {
	out := Recall{}
	of := func(k grantKey) GrantRecord {
		if g, ok := out[k]; ok {
			return g
		}
		return w.Memory.Of(k.uid, k.token)
	}
	st := &w.Fl.Status
	if done.Status {
		st = &d.Status
	}
	if h := w.Fl.Status.Holder; h != nil {
		g := rememberHeld(w, d, done, st, h)
		out[g.Key()] = g
	}
	if h := d.Granted(); h != nil && (done.Status || done.Lease) {
		g := of(grantKey{h.PodUID, h.Token})
		if done.Status && g.ObservedAt.IsZero() {
			g.Renewal = g.Observe(nil, now) // its first look: the startup deadline counts from here
		}
		if done.Lease && d.GrantOnLease && d.StatusWait > 0 {
			g.GrantedOnLeaseAt = d.now // G2 landed; the status follows (G4)
		}
		out[g.Key()] = g
	}
	if rv := st.LastRevocation; rv != nil && rv.DelaySeconds > 0 {
		g := of(grantKey{rv.PodUID, rv.Token})
		if g.DelaySince.IsZero() {
			// X8 counts from the revocation when this pass made it, else from this
			// process's first look.
			g.DelaySince = w.DelaySince
			if t := d.Ended(Revoke); done.Status && t != nil {
				g.DelaySince = d.now
				if !t.at.IsZero() {
					g.DelaySince = t.at
				}
			}
		}
		out[g.Key()] = g
	}
	if rec := w.Record; rec.HolderUID != "" {
		k := grantKey{rec.HolderUID, rec.Token}
		if _, ok := w.Memory[k]; ok {
			out[k] = of(k)
		}
	}
	return out
}

// rememberHeld is the record of h, the grant the status named when the pass began: the
// revocation it began, the hand-off request's start, whether it is settled. st is the
// status as it now stands.
func rememberHeld(w World, d Decision, done Landed, st *fencingv1.FencedLeaseStatus, h *fencingv1.Holder) GrantRecord {
	g := w.Held
	if t := d.Ended(Revoke); t != nil && done.LeaseCut {
		g.Revoking = PendingRevocation{Reason: t.Revocation, message: t.Message, Lateness: t.Lateness, At: d.now}
		if d.handsOver() {
			g.Revoking.handedOverAt = d.now
			g.Revoking.PodsFollowed = done.All && d.Plan.Has(DemotePods)
		}
	}
	g.HandoffSince = time.Time{}
	if s := st.Holder; s != nil && s.PodUID == h.PodUID && s.Token == h.Token && s.Handoff != nil {
		// Asked before (remembered, or first seen now), or in this pass: a withdrawn
		// request is forgotten, so a later one gets its whole grace period (H5).
		g.HandoffSince = w.HandoffSince
		if g.HandoffSince.IsZero() {
			g.HandoffSince = d.now
		}
	}
	g.Settled = done.All && d.Plan.Settles
	return g
}
