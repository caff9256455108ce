package fencedlease

import (
	"slices"

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

// takeTurns gives each slot that grants on its Lease its turn, in slot order (the order
// their tokens were decided in).
func takeTurns(slots []*slotRun) {
	var prev <-chan bool
	for _, sr := range slots {
		if !sr.d.Plan.LandsToken() {
			continue
		}
		done := make(chan bool, 1)
		sr.turn = &grantTurn{prev: prev, done: done}
		prev = done
	}
}

// assignPods leaves each pod in the pods of one slot at most, so the slots write at once
// without sharing a pod: in the slot whose decision names it (claimed), else in the first
// slot that sees it (a pod no slot names is only ever demoted).
func assignPods(slots []*slotRun, claimed map[int32][]types.UID) {
	owner := map[types.UID]int32{}
	for i, uids := range claimed {
		for _, uid := range uids {
			owner[uid] = i
		}
	}
	given := map[types.UID]bool{}
	for _, sr := range slots {
		i := sr.w.Slot.Index
		sr.pods = slices.DeleteFunc(sr.pods, func(pod corev1.Pod) bool {
			if o, named := owner[pod.UID]; named {
				return o != i
			}
			if given[pod.UID] {
				return true
			}
			given[pod.UID] = true
			return false
		})
	}
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
	for _, pods := range [][]corev1.Pod{w.Pods, w.Unlabeled} {
		for i := range pods {
			if p := &pods[i]; named[p.UID] || markedAsGranted(p) {
				out = append(out, *p)
			}
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
