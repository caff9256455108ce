package fencedlease

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/pkg/leaserecord"
)

// slotPass is what the slots of one pass share.
type slotPass struct {
	// fl is the FencedLease as the pass last read or wrote it, its status listing every
	// slot; pods are its labeled pods as the pass began.
	fl   *fencingv1.FencedLease
	pods []corev1.Pod
	// floor is the highest token any slot's Lease carried when the pass began, or a slot
	// of this pass decided: no slot grants one at or below it, whether or not the status
	// records it yet (a grant made on its Lease first).
	floor int64
	// onLease is what each slot's Lease named when the pass began.
	onLease leaserecord.Slots
	// claimed are, per slot judged in this pass, the pods its decision names: the grant
	// that ended and the one that holds now.
	claimed map[int32][]types.UID
	// notes are what keeps each slot judged in this pass from granting (slotNotes).
	notes slotNotes
	// finalized: a slot released the finalizer of the deleted FencedLease.
	finalized bool
	// judged: the slot the pass is at decided (its pass did not end before, on a cache
	// behind this controller's writes); skipped: one did not, so the slots after it grant
	// no one in this pass.
	judged, skipped bool
}

// passSlots judges a FencedLease with slots one slot at a time, in order, each as a
// FencedLease of one grant (slots.go), then writes what the status says of the whole
// FencedLease when that alone changed. It asks to run again when the soonest slot does.
func (r *Reconciler) passSlots(ctx context.Context, fl *fencingv1.FencedLease) (ctrl.Result, error) {
	p, err := r.beginSlots(ctx, fl)
	if err != nil {
		return ctrl.Result{}, err
	}
	var res ctrl.Result
	for _, i := range p.indices() {
		s := slotFrame{index: i, sharded: true, recorded: slotRecorded(&p.fl.Status, i), retired: i >= holdersOf(fl),
			ordinal: fl.Spec.SlotAssignment == fencingv1.SlotAssignmentOrdinal, noGrant: p.skipped, pass: p}
		s.others, s.othersHeld = p.othersOf(i)
		p.judged = false
		out, err := r.pass(ctx, slotView(p.fl, i, p.floor), s)
		if err != nil {
			return ctrl.Result{}, err
		}
		res = sooner(res, out)
		switch {
		case p.finalized:
			return ctrl.Result{}, nil
		case !p.judged:
			// The cache is behind for this slot (its own pods, written by the last pass):
			// the later slots still judge their holders, but must not take the pod this
			// one would have.
			p.skipped = true
		}
	}
	next := p.fl.DeepCopy()
	finishSlots(&next.Status, next, p.pods, p.notes)
	if equality.Semantic.DeepEqual(next.Status, p.fl.Status) {
		return res, nil
	}
	from := next.ResourceVersion
	err = r.Status().Update(ctx, next)
	r.ownWrites.after(next, from, err)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("writing status: %w", err)
	}
	r.metrics.setStatus(client.ObjectKeyFromObject(next), next.Status)
	return res, nil
}

// beginSlots reads what the slots of fl share in a pass: the labeled pods, and every
// Lease the operator made for fl — the token floor is the highest they carry, so a
// re-created FencedLease continues above the tokens of slots it no longer has.
func (r *Reconciler) beginSlots(ctx context.Context, fl *fencingv1.FencedLease) (*slotPass, error) {
	pods, err := r.pods.forLease(fl.Namespace, fl.Name)
	if err != nil {
		return nil, err
	}
	onLease, err := r.slotRecords(ctx, fl)
	if err != nil {
		return nil, err
	}
	return &slotPass{fl: fl, pods: pods, onLease: onLease, floor: onLease.Floor(), claimed: map[int32][]types.UID{}, notes: slotNotes{}}, nil
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

// slotLeasesFloor is the highest token on the Leases of fl's slots (their tombstones
// outlive a FencedLease deleted with more slots than it is re-created with).
func (r *Reconciler) slotLeasesFloor(ctx context.Context, fl *fencingv1.FencedLease) (int64, error) {
	recs, err := r.slotRecords(ctx, fl)
	return recs.Floor(), err
}

// slotGrantOnLeases is true when the Lease of a slot above 0 of fl records a grant, held
// or released.
func (r *Reconciler) slotGrantOnLeases(ctx context.Context, fl *fencingv1.FencedLease) (bool, error) {
	recs, err := r.slotRecords(ctx, fl)
	for slot, rec := range recs {
		if slot > 0 && rec.HasHolderUID {
			return true, nil
		}
	}
	return false, err
}

// indices are the slots the pass judges: those of the status (slotIndices), and any
// whose Lease names a grant the status does not list (made on the Lease just before
// spec.holders was lowered): that grant is adopted and asked to hand off like any.
func (p *slotPass) indices() []int32 {
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
	for _, s := range p.fl.Status.Slots {
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
	if len(p.fl.Status.Slots) == 0 && i != 0 {
		// Slots only now: slot 0 is the status's single grant.
		if h := p.fl.Status.Holder; h != nil {
			add(h.PodUID)
			held = true
		}
		if rv := p.fl.Status.LastRevocation; rv != nil {
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

// slotRecorded is the highest token status st records for slot j's grants: its last
// recorded grant's (held, released or revoked), its holder's, its last revocation's.
func slotRecorded(st *fencingv1.FencedLeaseStatus, j int32) int64 {
	s := slotOf(st, j)
	t := s.LastToken
	if s.Holder != nil {
		t = max(t, s.Holder.Token)
	}
	if s.LastRevocation != nil {
		t = max(t, s.LastRevocation.Token)
	}
	return t
}

// decided records slot i's decision d, taken on w: the pods it names, and the token
// floor it raised. Nothing for a FencedLease without slots (p nil).
func (p *slotPass) decided(i int32, w world, d decision) {
	if p == nil {
		return
	}
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
	p.notes.note(i, &d.status)
	p.finalized = d.plan.has(releaseFinalizer)
	p.judged = true
}

// writeSlotStatus writes the FencedLease's status with slot s as decision d has it (the
// view fl carries the slot's status), with the resourceVersion last read or written,
// when that changes it; the view moves on to the version written.
func (r *Reconciler) writeSlotStatus(ctx context.Context, view *fencingv1.FencedLease, s slotFrame, d decision) error {
	p := s.pass
	next := p.fl.DeepCopy()
	next.Status = withSlot(p.fl, s.index, &d.status, p.pods, p.notes)
	if equality.Semantic.DeepEqual(next.Status, p.fl.Status) {
		return nil
	}
	from := next.ResourceVersion
	err := r.Status().Update(ctx, next)
	r.ownWrites.after(next, from, err)
	if err != nil {
		return fmt.Errorf("writing status: %w", err)
	}
	p.fl = next
	view.ResourceVersion = next.ResourceVersion
	r.emitEvents(ctx, view, d, strconv.Itoa(int(s.index)))
	r.metrics.setStatus(client.ObjectKeyFromObject(next), next.Status)
	return nil
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
