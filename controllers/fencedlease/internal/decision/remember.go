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
// names any more — not the status, before or after, nor the Lease — are dropped. It
// reads the plan the pass ran, and which of its writes landed.
func Remember(w World, p Plan, done Landed, now time.Time) Recall {
	out := Recall{}
	of := func(k grantKey) GrantRecord {
		if g, ok := out[k]; ok {
			return g
		}
		return w.Memory.Of(k.uid, k.token)
	}
	st := &w.FL.Status
	writeStatus, cut, writeLease := p.Step(WriteStatus), p.Step(CutLease), p.Step(WriteLease)
	if done.Status && writeStatus != nil {
		st = writeStatus.Status
	}
	if h := w.FL.Status.Holder; h != nil {
		g := rememberHeld(w, p, done, st, h, cut)
		out[g.Key()] = g
	}
	if h := p.Granted; h != nil && (done.Status || done.Lease) {
		g := of(grantKey{h.PodUID, h.Token})
		if done.Status && g.ObservedAt.IsZero() {
			g.Renewal = g.Observe(nil, now) // its first look: the startup deadline counts from here
		}
		if done.Lease && writeLease != nil && writeLease.FirstRecord {
			g.GrantedOnLeaseAt = p.Now // G2 landed; the status follows (G4)
		}
		out[g.Key()] = g
	}
	if rv := st.LastRevocation; rv != nil && rv.DelaySeconds > 0 {
		g := of(grantKey{rv.PodUID, rv.Token})
		if g.DelaySince.IsZero() {
			// X8 counts from the revocation when this pass made it, else from this
			// process's first look.
			g.DelaySince = w.DelaySince
			if done.Status && writeStatus != nil && !writeStatus.RevokedAt.IsZero() {
				g.DelaySince = writeStatus.RevokedAt
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
// status as it now stands; cut the plan's step that cuts the grant on the Lease, if any.
func rememberHeld(w World, p Plan, done Landed, st *fencingv1.FencedLeaseStatus, h *fencingv1.Holder, cut *Step) GrantRecord {
	g := w.Held
	if cut != nil && cut.Revoking != nil && done.LeaseCut {
		g.Revoking = *cut.Revoking
		if !g.Revoking.handedOverAt.IsZero() {
			g.Revoking.PodsFollowed = done.All && p.Has(DemotePods)
		}
	}
	g.HandoffSince = time.Time{}
	if s := st.Holder; s != nil && s.PodUID == h.PodUID && s.Token == h.Token && s.Handoff != nil {
		// Asked before (remembered, or first seen now), or in this pass: a withdrawn
		// request is forgotten, so a later one gets its whole grace period (H5).
		g.HandoffSince = w.HandoffSince
		if g.HandoffSince.IsZero() {
			g.HandoffSince = p.Now
		}
	}
	g.Settled = done.All && p.Settles
	return g
}
