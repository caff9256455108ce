package fencedlease

import (
	"context"
	"slices"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/pkg/leaserecord"
)

// beginPass reads what the slots of fl share in a pass: the labeled pods, and every
// Lease the operator made for fl — the token floor is the highest they carry, so a
// re-created FencedLease continues above the tokens of slots it no longer has.
func (r *Reconciler) beginPass(ctx context.Context, fl *fencingv1.FencedLease) (*slotPass, error) {
	pods, err := r.pods.forLease(fl.Namespace, fl.Name)
	if err != nil {
		return nil, err
	}
	onLease, err := r.slotRecords(ctx, fl)
	if err != nil {
		return nil, err
	}
	p := &slotPass{fl: fl, next: fl.DeepCopy(), pods: pods, onLease: onLease, floor: onLease.Floor(), claimed: map[int32][]types.UID{}, notes: slotNotes{}}
	// A FencedLease whose status never listed slots (spec.holders lowered to 1 before any
	// slot's status write landed) yet a slot's Lease records a grant: its slots are judged.
	p.sharded = sharded(fl) || grantAboveSlot0(onLease)
	p.pending = map[types.UID]bool{}
	for j, rec := range onLease {
		if rec.Holder != "" && rec.GrantAbove(slotRecorded(&fl.Status, j)) {
			p.pending[rec.HolderUID] = true
		}
	}
	return p, nil
}

// grantAboveSlot0 is true when the Lease of a slot above 0 records a grant, held or
// released.
func grantAboveSlot0(recs leaserecord.Slots) bool {
	for slot, rec := range recs {
		if slot > 0 && rec.HasHolderUID {
			return true
		}
	}
	return false
}

// frame is slot i as this pass judges it.
func (p *slotPass) frame(i int32) slotFrame {
	fl := p.fl
	s := slotFrame{index: i, pass: p, noGrant: p.skipped, recorded: slotRecorded(&fl.Status, i)}
	if p.sharded {
		s.sharded, s.retired, s.ordinal = true, i >= holdersOf(fl), fl.Spec.SlotAssignment == fencingv1.SlotAssignmentOrdinal
	}
	s.others, s.othersHeld = p.othersOf(i)
	return s
}

// view is what slot i judges: the FencedLease itself for one grant, else the slot's view
// of it (slotView) as the earlier slots of this pass left it.
func (p *slotPass) view(i int32) *fencingv1.FencedLease {
	if !p.sharded {
		return p.next.DeepCopy()
	}
	return slotView(p.next, i, p.floor)
}

// slotRecords reads fl's slots' Leases, by slot, from the cache (it holds the operator's
// labeled Leases: no request).
func (r *Reconciler) slotRecords(ctx context.Context, fl *fencingv1.FencedLease) (leaserecord.Slots, error) {
	leases := &coordinationv1.LeaseList{}
	if err := r.List(ctx, leases, client.InNamespace(fl.Namespace), client.MatchingLabels{fencingv1.LeaseLabel: fl.Name}); err != nil {
		return nil, err
	}
	return leaserecord.ReadSlots(leases.Items, fl.Name), nil
}

// indices are the slots the pass judges: those of the status (slotIndices), and any
// whose Lease names a grant the status does not list (made on the Lease just before
// spec.holders was lowered): that grant is adopted and asked to hand off like any.
func (p *slotPass) indices() []int32 {
	if !p.sharded {
		return []int32{0}
	}
	out := slotIndices(p.fl)
	for i, rec := range p.onLease {
		if rec.HasHolderUID && !slices.Contains(out, i) {
			out = append(out, i)
		}
	}
	slices.Sort(out)
	return out
}

// othersOf are the pods the slots other than i name — holder, last revoked, hand-off
// successor; in the status, on their Lease, or in a decision of this pass — and whether
// one of them has a holder still.
func (p *slotPass) othersOf(i int32) (map[types.UID]bool, bool) {
	others := map[types.UID]bool{}
	held := false
	add := func(uid types.UID) {
		if uid != "" {
			others[uid] = true
		}
	}
	for _, s := range p.next.Status.Slots {
		if s.Slot == i {
			continue
		}
		if s.Holder != nil {
			add(s.Holder.PodUID)
			held = true
			if ho := s.Holder.Handoff; ho != nil {
				add(ho.SuccessorUID) // one slot's successor is no other slot's
			}
		}
		if s.LastRevocation != nil {
			add(s.LastRevocation.PodUID)
		}
	}
	if len(p.next.Status.Slots) == 0 && i != 0 {
		// Slots only now: slot 0 is the status's single grant.
		if h := p.next.Status.Holder; h != nil {
			add(h.PodUID)
			held = true
		}
		if rv := p.next.Status.LastRevocation; rv != nil {
			add(rv.PodUID)
		}
	}
	for j, rec := range p.onLease {
		if j == i || !rec.HasHolderUID {
			continue
		}
		add(rec.HolderUID) // named on its Lease, or released there and not yet recorded
		if rec.Holder != "" && rec.GrantAbove(slotRecorded(&p.fl.Status, j)) {
			held = true // a grant only its Lease records (G2): its pod may be at work
		}
	}
	for j, uids := range p.claimed {
		if j != i {
			for _, uid := range uids {
				add(uid)
			}
		}
	}
	return others, held
}

// decided records slot i's decision d, taken on w: the pods it names, the token floor it
// raised, and — when it changes the status (records) — its status in the projection the pass writes.
func (p *slotPass) decided(i int32, w world, d decision, records bool) {
	p.floor = max(p.floor, d.status.FencingToken)
	if h := w.fl.Status.Holder; h != nil {
		p.claimed[i] = append(p.claimed[i], h.PodUID)
	}
	if h := d.status.Holder; h != nil {
		p.claimed[i] = append(p.claimed[i], h.PodUID)
		if ho := h.Handoff; ho != nil && ho.SuccessorUID != "" {
			p.claimed[i] = append(p.claimed[i], ho.SuccessorUID)
		}
	}
	if p.notes.note(i, &d.status) {
		p.finishedNow = nil
	}
	p.finalized = d.plan.has(releaseFinalizer)
	p.skipped = p.skipped || grantsInStatus(w, d)
	if !records {
		return
	}
	p.finishedNow = nil
	if p.sharded {
		p.next.Status = withSlot(p.next, i, &d.status)
		p.finish(&p.next.Status)
	} else {
		p.next.Status = *d.status.DeepCopy()
	}
}

// projected is the status the pass writes: every recorded decision, and what the status
// says of the whole FencedLease recomputed for a FencedLease with slots.
func (p *slotPass) projected() *fencingv1.FencedLease {
	next := p.next.DeepCopy()
	next.ResourceVersion = p.fl.ResourceVersion
	if p.sharded {
		p.finish(&next.Status)
	}
	return next
}

// sooner is the result that runs again sooner: a requeue before none.
func sooner(a, b ctrl.Result) ctrl.Result {
	switch {
	case a.RequeueAfter <= 0:
		return b
	case b.RequeueAfter <= 0 || a.RequeueAfter <= b.RequeueAfter:
		return a
	}
	return b
}
