package fencedlease

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/controllers/fencedlease/internal/decision"
	"github.com/fencedlease/fencedlease/pkg/leaserecord"
)

func slotHolder(pod string, token int64, renewed bool) *fencingv1.Holder {
	h := &fencingv1.Holder{PodName: pod, PodUID: types.UID("uid-" + pod), Token: token, AcquireTime: *decision.MicroTime(t0)}
	if renewed {
		h.FirstRenewTime = decision.MicroTime(t0)
	}
	return h
}

func slotsFL(holders int32, slots ...fencingv1.Slot) *fencingv1.FencedLease {
	fl := newFL(10)
	fl.Spec.Holders = holders
	fl.Status.Slots = slots
	for _, s := range slots {
		if s.Holder != nil {
			fl.Status.FencingToken = max(fl.Status.FencingToken, s.Holder.Token)
		}
	}
	return fl
}

// N1: slot 0's Lease is the FencedLease's own, slot k's <name>-slot-k.
func TestSlotLeaseNames(t *testing.T) {
	if got := fencingv1.SlotLeaseName("inv", 0); got != "inv" {
		t.Fatalf("slot 0's Lease is the FencedLease's own: %q", got)
	}
	if got := fencingv1.SlotLeaseName("inv", 7); got != "inv-slot-7" {
		t.Fatalf("slot 7: %q", got)
	}
	for slot := range int32(12) {
		if got, ok := leaserecord.SlotOfLease("inv", fencingv1.SlotLeaseName("inv", slot)); !ok || got != slot {
			t.Errorf("the Lease of slot %d reads back as slot %d, %v", slot, got, ok)
		}
	}
}

func TestSlotViewOfASingleGrant(t *testing.T) {
	// spec.holders raised from 1: the status still has the single form.
	fl := newFL(10)
	fl.Spec.Holders = 3
	fl.Status = fencingv1.FencedLeaseStatus{FencingToken: 4, Holder: slotHolder("a", 4, true), Transitions: 4, Revocations: 1,
		LastRevocation: &fencingv1.Revocation{PodName: "z", PodUID: "uid-z", Token: 3}}
	v0 := decision.SlotView(fl, 0, 0)
	if v0.Status.Holder == nil || v0.Status.Holder.PodName != "a" || v0.Status.LastRevocation.Token != 3 {
		t.Fatalf("slot 0 is the single grant: %+v", v0.Status)
	}
	v1 := decision.SlotView(fl, 1, 9)
	if v1.Status.Holder != nil || v1.Status.LastRevocation != nil || v1.Status.FencingToken != 9 || v1.Status.Transitions != 4 {
		t.Fatalf("slot 1 is free, with the counter at the floor: %+v", v1.Status)
	}
	if r0, r1 := decision.SlotRecorded(&fl.Status, 0), decision.SlotRecorded(&fl.Status, 1); r0 != 4 || r1 != 0 {
		t.Fatalf("recorded tokens: %d, %d", r0, r1)
	}

	// Slot 1 grants b token 10: the status takes the slots form.
	v1.Status.Holder = slotHolder("b", 10, false)
	v1.Status.FencingToken, v1.Status.Transitions = 10, 5
	st := decision.WithSlot(fl, 1, &v1.Status)
	decision.FinishSlots(&st, fl, nil, nil, nil)
	if st.Holder != nil || st.LastRevocation != nil {
		t.Fatalf("status.holder is unset once slots are listed: %+v", st)
	}
	if len(st.Slots) != 3 || st.Slots[0].Holder.PodName != "a" || st.Slots[0].LastRevocation.Token != 3 ||
		st.Slots[1].Holder.PodName != "b" || st.Slots[2].Holder != nil {
		t.Fatalf("slots: %+v", st.Slots)
	}
	if st.FencingToken != 10 || st.Transitions != 5 || st.Revocations != 1 || st.Holding != "2/3" {
		t.Fatalf("counters: token %d transitions %d revocations %d holding %q", st.FencingToken, st.Transitions, st.Revocations, st.Holding)
	}
}

func TestFinishSlotsListsEachSlotOnce(t *testing.T) {
	// Lowered from 4 to 2: slot 3 drains (it has a holder), slot 2 is gone (none).
	fl := slotsFL(2, fencingv1.Slot{Slot: 3, Holder: slotHolder("d", 4, true)}, fencingv1.Slot{Slot: 0, Holder: slotHolder("a", 1, true)},
		fencingv1.Slot{Slot: 2})
	st := fl.Status.DeepCopy()
	decision.FinishSlots(st, fl, nil, nil, nil)
	var got []int32
	for _, s := range st.Slots {
		got = append(got, s.Slot)
	}
	if len(got) != 3 || got[0] != 0 || got[1] != 1 || got[2] != 3 {
		t.Fatalf("slots %v, want [0 1 3]", got)
	}
	if st.Holding != "2/2" {
		t.Fatalf("holding %q: a draining slot counts as held", st.Holding)
	}
	if ix := decision.SlotIndices(fl); len(ix) != 3 || ix[2] != 3 {
		t.Fatalf("the pass judges 0, 1 and the draining 3: %v", ix)
	}
}

func TestSlotConditions(t *testing.T) {
	waiter := pod("w", t0)
	cases := []struct {
		name          string
		fl            *fencingv1.FencedLease
		pods          []corev1.Pod
		held, ready   metav1.ConditionStatus
		readyReason   string
		waitingCounts int32
	}{
		{"every slot held by a pod that renewed",
			slotsFL(2, fencingv1.Slot{Slot: 0, Holder: slotHolder("a", 1, true)}, fencingv1.Slot{Slot: 1, Holder: slotHolder("b", 2, true)}),
			[]corev1.Pod{waiter}, metav1.ConditionTrue, metav1.ConditionTrue, fencingv1.ReasonHeld, 1},
		{"a holder not started yet",
			slotsFL(2, fencingv1.Slot{Slot: 0, Holder: slotHolder("a", 1, true)}, fencingv1.Slot{Slot: 1, Holder: slotHolder("b", 2, false)}),
			nil, metav1.ConditionTrue, metav1.ConditionFalse, fencingv1.ReasonHolderStarting, 0},
		{"a free slot nobody waits for",
			slotsFL(2, fencingv1.Slot{Slot: 0, Holder: slotHolder("a", 1, true)}),
			nil, metav1.ConditionTrue, metav1.ConditionTrue, fencingv1.ReasonHeld, 0},
		{"a free slot with a pod waiting",
			slotsFL(2, fencingv1.Slot{Slot: 0, Holder: slotHolder("a", 1, true)}),
			[]corev1.Pod{waiter}, metav1.ConditionTrue, metav1.ConditionFalse, fencingv1.ReasonWaiting, 1},
		{"nobody holds, nobody waits",
			slotsFL(2), nil, metav1.ConditionFalse, metav1.ConditionTrue, fencingv1.ReasonIdle, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := tc.fl.Status.DeepCopy()
			decision.FinishSlots(st, tc.fl, tc.pods, nil, nil)
			held := meta.FindStatusCondition(st.Conditions, fencingv1.ConditionHeld)
			ready := meta.FindStatusCondition(st.Conditions, fencingv1.ConditionReady)
			if held.Status != tc.held || ready.Status != tc.ready || ready.Reason != tc.readyReason || st.Waiting != tc.waitingCounts {
				t.Fatalf("Held %s, Ready %s %s (%s), waiting %d", held.Status, ready.Status, ready.Reason, ready.Message, st.Waiting)
			}
		})
	}
}

func TestSlotMayGrant(t *testing.T) {
	ordinal := func(name, index string) *corev1.Pod {
		p := pod(name, t0)
		p.Labels["apps.kubernetes.io/pod-index"] = index
		return &p
	}
	a, b, c := ordinal("s-0", "0"), ordinal("s-1", "1"), pod("plain", t0)
	waiting := []*corev1.Pod{b, a, &c}
	if got := (decision.SlotFrame{Index: 1}).MayGrant(waiting); len(got) != 3 {
		t.Fatalf("Any: every candidate, in order: %d", len(got))
	}
	if got := (decision.SlotFrame{Index: 1, Retired: true}).MayGrant(waiting); got != nil {
		t.Fatalf("a removed slot grants no one: %v", got)
	}
	if got := (decision.SlotFrame{Index: 1, NoGrant: true}).MayGrant(waiting); got != nil {
		t.Fatalf("a slot after one the pass could not judge grants no one: %v", got)
	}
	if got := (decision.SlotFrame{Index: 1, Ordinal: true}).MayGrant(waiting); len(got) != 1 || got[0] != b {
		t.Fatalf("Ordinal: the pod of index 1 alone: %v", got)
	}
	if got := (decision.SlotFrame{Index: 2, Ordinal: true}).MayGrant(waiting); len(got) != 0 {
		t.Fatalf("Ordinal: no pod of index 2: %v", got)
	}
}

// N3: a slot never sees the pods another slot names.
func TestOthersOfASlot(t *testing.T) {
	asked := slotHolder("a", 1, true)
	asked.Handoff = &fencingv1.Handoff{SuccessorName: "s", SuccessorUID: "uid-s"}
	fl := slotsFL(3, fencingv1.Slot{Slot: 0, Holder: asked},
		fencingv1.Slot{Slot: 1, LastRevocation: &fencingv1.Revocation{PodName: "r", PodUID: "uid-r", Token: 2}})
	p := &decision.SlotPass{FL: fl, Next: fl, OnLease: map[int32]leaserecord.Record{2: {Exists: true, Holder: "l", HolderUID: "uid-l", HasHolderUID: true, Token: 3}},
		Claimed: map[int32][]types.UID{1: {"uid-n"}}}
	others, held := p.OthersOf(1)
	for _, uid := range []types.UID{"uid-a", "uid-l", "uid-s"} { // uid-s: slot 0's hand-off successor
		if !others.Has(uid) {
			t.Errorf("slot 1 must not see %s", uid)
		}
	}
	if others.Has("uid-r") || others.Has("uid-n") {
		t.Errorf("its own revoked and granted pods are slot 1's: %v", others)
	}
	if !held {
		t.Errorf("slot 0 has a holder")
	}
	if others, _ := p.OthersOf(0); !others.Has("uid-r") || !others.Has("uid-n") || others.Has("uid-a") {
		t.Errorf("slot 0 sees its own holder, not slot 1's pods: %v", others)
	}
}

// H6: a removed slot's holder is asked to hand off to no one; raised again, withdrawn (H5).
func TestSlotRemovedRule(t *testing.T) {
	retired := func(in *decision.Input) { in.Slot = decision.SlotFrame{Index: 2, Sharded: true, Retired: true} }
	runRuleTable(t, decision.SlotRemovedRule, []ruleCase{
		{name: "a slot in use", applies: false},
		{name: "a removed slot's holder is asked to hand off", mod: retired, applies: true, kind: decision.AskHandoff},
		{name: "asked already", mod: all(retired, handoffAsked(30, t0)), applies: false},
	})
	removedAsked := func(in *decision.Input) {
		in.H.Handoff = &fencingv1.Handoff{SuccessorName: fencingv1.SlotRemovedSuccessor, GracePeriodSeconds: 30}
		in.HandoffSince = t0
	}
	runRuleTable(t, decision.HandoffWithdrawnRule, []ruleCase{
		{name: "the slot is still removed: the request stands", mod: all(retired, removedAsked), applies: false},
		{name: "spec.holders raised again: withdrawn", mod: removedAsked, applies: true, kind: decision.WithdrawHandoff},
	})
	in := ruleInput(clocktesting.NewFakeClock(t0.Add(5*time.Second)), retired)
	if tr, _ := decision.SlotRemovedRule(in); tr.Successor.SuccessorName != fencingv1.SlotRemovedSuccessor || tr.Successor.SuccessorUID != "" {
		t.Fatalf("the request names no successor pod: %+v", tr.Successor)
	}
}
