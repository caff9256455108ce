package fencedlease

import (
	"time"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// landed says which of a plan's writes took effect (a write that found nothing to change
// counts as landed).
type landed struct {
	// leaseCut: the compare-and-swap that ended the grant on the Lease (X3, C1).
	leaseCut bool
	// status: the status now records the decision.
	status bool
	// lease: the Lease now shows the status.
	lease bool
	// all: every step of the plan.
	all bool
}

// remember is what this process knows of the FencedLease's grants once a pass is over:
// what it observed, and what took effect of what it decided. It is the only writer of
// the grant memory in a pass; now is read after the writes. Records of grants nobody
// names any more — not the status, before or after, nor the Lease — are dropped.
func remember(w world, d decision, done landed, now time.Time) recall {
	out := recall{}
	of := func(k grantKey) grantRecord {
		if g, ok := out[k]; ok {
			return g
		}
		return w.memory.of(k.uid, k.token)
	}
	st := &w.fl.Status
	if done.status {
		st = &d.status
	}
	if h := w.fl.Status.Holder; h != nil {
		g := rememberHeld(w, d, done, st, h)
		out[g.key()] = g
	}
	if h := d.granted(); h != nil && (done.status || done.lease) {
		g := of(grantKey{h.PodUID, h.Token})
		if done.status && g.observedAt.IsZero() {
			g.renewal = g.observe(nil, now) // its first look: the startup deadline counts from here
		}
		if done.lease && d.grantOnLease && d.statusWait > 0 {
			g.grantedOnLeaseAt = d.now // G2 landed; the status follows (G4)
		}
		out[g.key()] = g
	}
	if rv := st.LastRevocation; rv != nil && rv.DelaySeconds > 0 {
		g := of(grantKey{rv.PodUID, rv.Token})
		if g.delaySince.IsZero() {
			// X8 counts from the revocation when this pass made it, else from this
			// process's first look.
			g.delaySince = w.delaySince
			if t := d.ended(revoke); done.status && t != nil {
				g.delaySince = d.now
				if !t.at.IsZero() {
					g.delaySince = t.at
				}
			}
		}
		out[g.key()] = g
	}
	if rec := w.record; rec.HolderUID != "" {
		k := grantKey{rec.HolderUID, rec.Token}
		if _, ok := w.memory[k]; ok {
			out[k] = of(k)
		}
	}
	return out
}

// rememberHeld is the record of h, the grant the status named when the pass began: the
// revocation it began, the hand-off request's start, whether it is settled. st is the
// status as it now stands.
func rememberHeld(w world, d decision, done landed, st *fencingv1.FencedLeaseStatus, h *fencingv1.Holder) grantRecord {
	g := w.held
	if t := d.ended(revoke); t != nil && done.leaseCut {
		g.revoking = pendingRevocation{reason: t.revocation, message: t.message, lateness: t.lateness, at: d.now}
		if d.handsOver() {
			g.revoking.handedOverAt = d.now
			g.revoking.podsFollowed = done.all && d.plan.has(demotePods)
		}
	}
	g.handoffSince = time.Time{}
	if s := st.Holder; s != nil && s.PodUID == h.PodUID && s.Token == h.Token && s.Handoff != nil {
		// Asked before (remembered, or first seen now), or in this pass: a withdrawn
		// request is forgotten, so a later one gets its whole grace period (H5).
		g.handoffSince = w.handoffSince
		if g.handoffSince.IsZero() {
			g.handoffSince = d.now
		}
	}
	g.settled = done.all && d.plan.settles
	return g
}
