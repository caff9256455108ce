package fencedlease

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/controllers/fencedlease/internal/decision"
)

// pass judges every slot of fl in turn — slot 0 alone for a FencedLease of one grant,
// the slot whose timer brought the pass first — and carries out their plans in three
// phases: each slot's writes that come before its status record (the Lease's
// compare-and-swap, the ended grant's pod), started as soon as the slot is judged; the
// status of the whole FencedLease, projected from every slot's decision and written once;
// then each slot's writes that follow the status (its Lease, its pods), and last the
// finalizer. A pass that writes a grant's first record on a Lease stops after the first
// phase, and the slots judged after that one that move no Lease write nothing (P1). A
// write that fails ends the pass; what landed is remembered, and the next pass finishes
// it from the Lease (as after a crash). It asks to run again when the soonest slot does,
// counted from when that slot was judged, not from the pass's end.
func (r *Reconciler) pass(ctx context.Context, fl *fencingv1.FencedLease) (ctrl.Result, error) {
	p, err := r.beginPass(ctx, fl)
	if err != nil {
		return ctrl.Result{}, err
	}
	early, start := newEarlyWrites(), r.clock.Now()
	slots, res, err := r.judgeSlots(ctx, p, early, start)
	// Remembered however the pass ends, from what each slot saw, decided and landed,
	// once the writes it started are over.
	defer r.rememberSlots(fl, slots)
	judged := slices.DeleteFunc(slices.Clone(slots), func(sr *slotRun) bool { return !sr.judged })
	if werr := early.wait(judged); err == nil {
		err = werr
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if early.onLease {
		// A holder starts on a Lease this pass wrote: what no holder waits for — the
		// status, the writes after it, the deferred slots' writes — follows in a pass of
		// its own, which the echo of this pass's writes brings, behind every Lease that
		// must move (P1).
		for _, sr := range judged {
			sr.done.All = !sr.deferred && !sr.d.Plan.Has(decision.WriteStatus) && !sr.d.Plan.Has(decision.ReleaseFinalizer)
		}
		res = sooner(res, ctrl.Result{RequeueAfter: decision.CacheBehind, Priority: priorityOf(decision.RequeueFollowUp)})
	} else if err := r.finishSlots(ctx, p, judged); err != nil {
		return ctrl.Result{}, err
	}
	if p.Finalized {
		return ctrl.Result{}, nil
	}
	if res.RequeueAfter > 0 {
		// The pass's writes took their time: a lease's end is due when the decision
		// said, not that long after the pass (at once when that is past).
		res.RequeueAfter = max(res.RequeueAfter-r.clock.Since(start), time.Millisecond)
	}
	return res, nil
}

// judgeSlots judges the slots of the pass one after another (SlotPass.Indices), each
// counting on the decisions before it, starts each one's writes before the status once
// it is judged (earlyWrites), and remembers which slot's timer it sets (GrantMemory.Due);
// a slot whose view is behind this controller's own writes is looked at again soon. It
// stops after a slot that lets the deleted FencedLease go. The result's RequeueAfter
// counts from start.
func (r *Reconciler) judgeSlots(ctx context.Context, p *decision.SlotPass, early *earlyWrites, start time.Time) ([]*slotRun, ctrl.Result, error) {
	var slots []*slotRun
	var res ctrl.Result
	due, hasDue := int32(0), false
	defer func() { r.grants.SetDue(client.ObjectKeyFromObject(p.FL), due, hasDue && p.Sharded) }()
	for _, i := range p.Indices() {
		sr, err := r.judgeSlot(ctx, p, p.Frame(i))
		if sr != nil {
			slots = append(slots, sr)
		}
		if err != nil {
			return slots, res, err
		}
		if !sr.judged {
			// The cache is behind for this slot (its own pods, written by the last pass):
			// the later slots still judge their holders, but must not take the pod this
			// one would have.
			p.Skipped = true
			res = sooner(res, ctrl.Result{RequeueAfter: decision.CacheBehind})
			continue
		}
		early.start(sr, p.Claimed, p.Sharded, func(sr *slotRun) error { return r.runSteps(ctx, sr, false) })
		own := resultOf(sr.d.Plan)
		if own.RequeueAfter > 0 {
			own.RequeueAfter += sr.w.Now.Sub(start) // from when the slot was judged
		}
		if next := sooner(res, own); next != res {
			res, due, hasDue = next, i, next.RequeueAfter > 0
		}
		if p.Finalized {
			break
		}
	}
	return slots, res, nil
}

// finishSlots carries out the rest of the judged slots' plans, once their writes before
// the status landed: the status, the writes after it, at once across slots, and the
// finalizer.
func (r *Reconciler) finishSlots(ctx context.Context, p *decision.SlotPass, judged []*slotRun) error {
	if err := r.writePassStatus(ctx, p, judged); err != nil {
		return err
	}
	err := eachSlot(judged, func(sr *slotRun) error {
		err := r.runSteps(ctx, sr, true)
		sr.done.All = err == nil && !sr.d.Plan.Has(decision.ReleaseFinalizer)
		return err
	})
	if err != nil || !p.Finalized {
		return err
	}
	done := p.FL.DeepCopy()
	controllerutil.RemoveFinalizer(done, fencingv1.Finalizer)
	if err := r.Update(ctx, done); err != nil {
		return err
	}
	judged[len(judged)-1].done.All = true
	return nil
}

// rememberSlots writes what each slot of the pass saw, decided and landed into the grant
// memory; the clock is read after the writes.
func (r *Reconciler) rememberSlots(fl *fencingv1.FencedLease, slots []*slotRun) {
	key := client.ObjectKeyFromObject(fl)
	for _, sr := range slots {
		r.grants.Write(sr.w.Slot.MemoryKey(key), decision.Remember(sr.w, sr.d.Plan, sr.done, r.clock.Now()))
	}
}

// judgeSlot observes slot s and decides, unless its view is behind this controller's own
// last writes. nil only when the first look failed.
func (r *Reconciler) judgeSlot(ctx context.Context, p *decision.SlotPass, s decision.SlotFrame) (*slotRun, error) {
	view := p.View(s.Index)
	w, err := r.observeSlot(ctx, view, s, false)
	if err != nil {
		return nil, err
	}
	sr := &slotRun{w: w}
	// The slot's view of the pods points into the pass's: only the ones its plan may
	// write are kept (below), as copies, whose writes replace their fields and never
	// change the maps they share with the pass's pods (patchPod).
	defer func() { sr.w.Pods, sr.w.Unlabeled, sr.w.Holder, sr.w.Successor = nil, nil, nil, nil }()
	if r.ownWrites.behind(w.FL, s.LeaseOwner(view), w.Lease, w.Pods) {
		// Deciding on a view older than this controller's own last write would only send
		// writes bound to fail on their resourceVersion.
		return sr, nil
	}
	d := decision.Decide(w)
	if w.LeaseUnread && !d.CreatesLease() {
		// The cache shows no Lease, and it holds labeled Leases only: ask the API server
		// (a Lease someone else created, a tombstone the watch has not brought yet), and
		// decide again. A grant whose first write is the Lease's creation needs no read:
		// the creation fails, spending nothing, if any Lease of that name exists (G2).
		again, err := r.observeSlot(ctx, view, s, true)
		if err != nil {
			return sr, err // nothing was decided: only the first look is remembered
		}
		w, d = again, decision.Decide(again)
	}
	sr.w, sr.d, sr.judged = w, d, true
	sr.records = d.Plan.Has(decision.WriteStatus) && !w.Unchanged(&d.Status)
	sr.fl = w.FL.DeepCopy()
	sr.fl.Status = d.Status
	sr.lease = w.Lease
	sr.pods = writablePods(w, d)
	p.Decided(s.Index, w, d, sr.records)
	return sr, nil
}

// writePassStatus writes the status the pass projects (SlotPass.projected), with the
// resourceVersion it read, when that changes it: a token is spent only if nobody else
// wrote in between. Events and metrics follow a successful write only.
func (r *Reconciler) writePassStatus(ctx context.Context, p *decision.SlotPass, slots []*slotRun) error {
	next := p.Projected()
	if !equality.Semantic.DeepEqual(next.Status, p.FL.Status) && !summaryWaits(slots) {
		from := next.ResourceVersion
		err := r.Status().Update(ctx, next)
		r.ownWrites.after(next, from, err)
		if err != nil {
			return fmt.Errorf("writing status: %w", err)
		}
		p.FL = next
		defer r.metrics.setStatus(client.ObjectKeyFromObject(next), next.Status) // after the events' counts
	}
	for _, sr := range slots {
		s := sr.d.Plan.Step(decision.WriteStatus)
		if s == nil {
			continue
		}
		sr.done.Status = true
		sr.fl.ResourceVersion = p.FL.ResourceVersion
		if sr.records {
			r.tell(ctx, sr.fl, s.Told)
		}
	}
	return nil
}

// eachSlot runs f for every slot at once — slots write their own Lease and pods, never
// another's (N3) — and returns the first slot's error, in slot order.
func eachSlot(slots []*slotRun, f func(*slotRun) error) error {
	if len(slots) == 1 {
		return f(slots[0])
	}
	errs := make([]error, len(slots))
	var wg sync.WaitGroup
	for i, sr := range slots {
		wg.Go(func() { errs[i] = f(sr) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// summaryWaits: no slot's decision changes the status, and a slot's status write waits for
// its new grant's first renewal (deferStatus): what the status says of the whole
// FencedLease (waiting, holding, the conditions) is written with that record, as a
// FencedLease of one grant writes it, not a write before it.
func summaryWaits(slots []*slotRun) bool {
	waits := false
	for _, sr := range slots {
		if sr.records {
			return false
		}
		waits = waits || sr.d.StatusWait > 0
	}
	return waits
}
