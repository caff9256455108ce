package fencedlease

import (
	"slices"
	"sync"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/controllers/fencedlease/internal/decision"
	"github.com/fencedlease/fencedlease/internal/grantorder"
)

// slotRun is one slot's part of a pass: what it observed and decided, and what of its
// plan landed.
type slotRun struct {
	w decision.World
	d decision.Decision
	// judged: the slot decided (its view was not behind this controller's own writes).
	judged bool
	// deferred: judged in a pass that writes a grant's first record on another slot's
	// Lease, it moves no Lease itself, so it writes nothing in this pass (P1).
	deferred bool
	// turn orders its grant among the slots' that land on their Leases (grantturn.go).
	turn *grantTurn
	// records: its plan records its decision in the status, and that changes the status.
	records bool
	// fl is the slot's view carrying the decided status; lease the slot's Lease as last
	// read or written; pods its pods, labeled or not.
	fl    *fencingv1.FencedLease
	lease *coordinationv1.Lease
	pods  []corev1.Pod
	done  decision.Landed
}

// earlyWrites starts each judged slot's writes that come before the pass's status write
// (runSteps, afterStatus false) as soon as it is judged, at once with the judging of the
// slots after it, so a slot's hand-over waits for no other slot's judging. The pass
// waits for them all before its status write.
type earlyWrites struct {
	// owner is the slot whose decision names a pod (SlotPass.Claimed), given the pods
	// no decision names that a slot sees first.
	owner map[types.UID]int32
	given map[types.UID]bool
	// lastTurn is the turn of the last slot judged that grants on its Lease.
	lastTurn <-chan bool
	// onLease: a slot judged so far writes a grant's first record on its Lease. The pass
	// then does only what holders need to start (P1): the slots judged after it that move
	// no Lease write nothing, and the status and the writes after it wait for a pass that
	// writes no first record.
	onLease bool
	wg      sync.WaitGroup
	errs    map[*slotRun]error
	mu      sync.Mutex
}

func newEarlyWrites() *earlyWrites {
	return &earlyWrites{owner: map[types.UID]int32{}, given: map[types.UID]bool{}, errs: map[*slotRun]error{}}
}

// start gives judged slot sr its pods and its turn, then runs its writes before the
// status: in the background for a FencedLease with slots, at once for one of one grant.
// A slot that moves no Lease, judged after one that writes a grant's first record on
// its Lease, is deferred instead (onLease).
func (e *earlyWrites) start(sr *slotRun, claimed map[int32][]types.UID, sharded bool, run func(*slotRun) error) {
	if e.onLease && !sr.d.Plan.MovesLease() {
		sr.deferred = true
		return
	}
	e.onLease = e.onLease || sr.d.Plan.FirstRecordOnLease()
	e.givePods(sr, claimed)
	e.takeTurn(sr)
	if !sharded {
		e.errs[sr] = run(sr)
		return
	}
	e.wg.Go(func() {
		err := run(sr)
		e.mu.Lock()
		e.errs[sr] = err
		e.mu.Unlock()
	})
}

// wait waits for every slot's writes and returns the first error, in slot order.
func (e *earlyWrites) wait(slots []*slotRun) error {
	e.wg.Wait()
	for _, sr := range slots {
		if err := e.errs[sr]; err != nil {
			return err
		}
	}
	return nil
}

// takeTurn gives sr, when it grants on its Lease, its turn after the last slot judged
// before it that does (the order their tokens were decided in).
func (e *earlyWrites) takeTurn(sr *slotRun) {
	if !sr.d.Plan.LandsToken() {
		return
	}
	done := make(chan bool, 1)
	sr.turn = &grantTurn{prev: e.lastTurn, done: done}
	e.lastTurn = done
}

// givePods leaves in sr's pods those no other slot's decision names and no slot judged
// before it was given, so the slots write at once without sharing a pod (N3). A slot
// judged later never names one of them: it does not see the pods the earlier slots'
// decisions name, and a pod no decision names is only ever demoted.
func (e *earlyWrites) givePods(sr *slotRun, claimed map[int32][]types.UID) {
	i := sr.w.Slot.Index
	for _, uid := range claimed[i] {
		e.owner[uid] = i
	}
	sr.pods = slices.DeleteFunc(sr.pods, func(pod corev1.Pod) bool {
		if o, named := e.owner[pod.UID]; named {
			return o != i
		}
		if e.given[pod.UID] {
			return true
		}
		e.given[pod.UID] = true
		return false
	})
}

// writablePods are the pods of w a slot's plan may write: those its decision names (the
// holder that was and the one that is, a hand-off's successor, the last revoked), and any
// still marked holding or revoked, or labeled holder or slot (demoted or deleted). A
// waiting pod no decision names is never written.
func writablePods(w decision.World, d decision.Decision) []corev1.Pod {
	named := map[types.UID]bool{}
	for _, h := range []*fencingv1.Holder{w.FL.Status.Holder, d.Status.Holder} {
		if h != nil {
			named[h.PodUID] = true
			if h.Handoff != nil {
				named[h.Handoff.SuccessorUID] = true
			}
		}
	}
	if rv := d.Status.LastRevocation; rv != nil {
		named[rv.PodUID] = true
	}
	var out []corev1.Pod
	for _, p := range w.Pods {
		if named[p.UID] || markedAsGranted(p) {
			out = append(out, *p)
		}
	}
	for i := range w.Unlabeled {
		if p := &w.Unlabeled[i]; named[p.UID] || markedAsGranted(p) {
			out = append(out, *p)
		}
	}
	return out
}

// markedAsGranted: p shows a grant, held or revoked, by its state or its labels.
func markedAsGranted(p *corev1.Pod) bool {
	_, holder := p.Labels[fencingv1.HolderLabel]
	_, slot := p.Labels[fencingv1.SlotLabel]
	switch grantorder.PodState(p) {
	case fencingv1.PodHolding, fencingv1.PodDraining, fencingv1.PodRevoked:
		return true
	}
	return holder || slot
}
