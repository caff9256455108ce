package decision

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/internal/grantorder"
)

// SlotIndices are the slots a pass judges: 0 to spec.holders-1, then every slot above
// that the status still lists with a holder (removed by lowering spec.holders, draining).
func SlotIndices(fl *fencingv1.FencedLease) []int32 {
	n := HoldersOf(fl)
	var out []int32
	for i := range n {
		out = append(out, i)
	}
	for _, s := range fl.Status.Slots {
		if s.Slot >= n && s.Holder != nil {
			out = append(out, s.Slot)
		}
	}
	return out
}

// SlotOf is slot i as status st records it; a status without slots records slot 0 in
// holder and lastRevocation (spec.holders raised from 1), and every token up to
// fencingToken as its grants'.
func SlotOf(st *fencingv1.FencedLeaseStatus, i int32) fencingv1.Slot {
	if len(st.Slots) == 0 && i == 0 {
		return fencingv1.Slot{Holder: st.Holder, LastRevocation: st.LastRevocation, LastToken: st.FencingToken}
	}
	for _, s := range st.Slots {
		if s.Slot == i {
			return s
		}
	}
	return fencingv1.Slot{Slot: i}
}

// SlotView is fl as slot i sees it: a FencedLease of one grant, the slot's, with the
// token counter at least floor (the highest token any slot's Lease carries, or this
// pass granted).
func SlotView(fl *fencingv1.FencedLease, i int32, floor int64) *fencingv1.FencedLease {
	v := &fencingv1.FencedLease{TypeMeta: fl.TypeMeta, ObjectMeta: *fl.ObjectMeta.DeepCopy(), Spec: *fl.Spec.DeepCopy()}
	s := SlotOf(&fl.Status, i)
	st := &fl.Status
	v.Status = fencingv1.FencedLeaseStatus{
		FencingToken:       max(st.FencingToken, floor),
		Holder:             s.Holder.DeepCopy(),
		Waiting:            st.Waiting,
		Transitions:        st.Transitions,
		Revocations:        st.Revocations,
		LastRevocation:     s.LastRevocation.DeepCopy(),
		ObservedGeneration: st.ObservedGeneration,
		Conditions:         slices.Clone(st.Conditions),
	}
	return v
}

// WithSlot is fl's status with slot i as its view's decided status v has it; what it says
// of the whole FencedLease is left to FinishSlots.
func WithSlot(fl *fencingv1.FencedLease, i int32, v *fencingv1.FencedLeaseStatus) fencingv1.FencedLeaseStatus {
	st := *fl.Status.DeepCopy()
	if len(st.Slots) == 0 {
		st.Slots = []fencingv1.Slot{SlotOf(&fl.Status, 0)}
	}
	st.Holder, st.LastRevocation = nil, nil
	s := mergedSlot(&fl.Status, i, v)
	if at := slices.IndexFunc(st.Slots, func(s fencingv1.Slot) bool { return s.Slot == i }); at >= 0 {
		st.Slots[at] = s
	} else {
		st.Slots = append(st.Slots, s)
	}
	st.FencingToken = max(st.FencingToken, v.FencingToken)
	st.Transitions, st.Revocations = v.Transitions, v.Revocations
	st.ObservedGeneration = v.ObservedGeneration
	return st
}

// mergedSlot is slot i as view status v decided it, to replace the slot in status st. The
// slot's last recorded grant stays recorded when it ends: its Lease may still name it,
// its pod gone, and it is never adopted a second time.
func mergedSlot(st *fencingv1.FencedLeaseStatus, i int32, v *fencingv1.FencedLeaseStatus) fencingv1.Slot {
	s := fencingv1.Slot{Slot: i, Holder: v.Holder.DeepCopy(), LastRevocation: v.LastRevocation.DeepCopy(), LastToken: SlotRecorded(st, i)}
	if v.Holder != nil {
		s.LastToken = max(s.LastToken, v.Holder.Token)
	}
	return s
}

// FinishSlots lists exactly the slots of fl — 0 to spec.holders-1, and removed ones
// while a holder drains — in order, and recomputes what the status says of the whole
// FencedLease: waiting, holding, the conditions. A FencedLease lowered to one slot keeps
// listing it: going back to status.holder could lose a grant its Lease records and the
// status does not yet. pending are the pods granted on a slot's Lease whose grant the
// status does not record yet: they count as waiting until it does, as a FencedLease of one
// grant counts them until its status write (deferStatus), so the summary changes with
// that write and costs none of its own.
func FinishSlots(st *fencingv1.FencedLeaseStatus, fl *fencingv1.FencedLease, pods []corev1.Pod, notes slotNotes, pending map[types.UID]bool) {
	n := HoldersOf(fl)
	st.Slots = slices.DeleteFunc(st.Slots, func(s fencingv1.Slot) bool { return s.Slot >= n && s.Holder == nil })
	for i := range n {
		if !slices.ContainsFunc(st.Slots, func(s fencingv1.Slot) bool { return s.Slot == i }) {
			st.Slots = append(st.Slots, fencingv1.Slot{Slot: i})
		}
	}
	slices.SortFunc(st.Slots, func(a, b fencingv1.Slot) int { return int(a.Slot - b.Slot) })
	st.Waiting = int32(waitingForSlots(pods, st, pending))
	held := 0
	for _, s := range st.Slots {
		if s.Holder != nil {
			held++
		}
	}
	st.Holding = fmt.Sprintf("%d/%d", held, n)
	setSlotConditions(st, fl, held, n, notes)
}

// waitingForSlots counts the pods waiting for a grant: the candidates among pods that no
// slot names, and the pending ones (granted on a Lease, not recorded) no slot names.
func waitingForSlots(pods []corev1.Pod, st *fencingv1.FencedLeaseStatus, pending map[types.UID]bool) int {
	named := map[types.UID]bool{}
	for _, s := range st.Slots {
		if s.Holder != nil {
			named[s.Holder.PodUID] = true
		}
		if s.LastRevocation != nil {
			named[s.LastRevocation.PodUID] = true
		}
	}
	n := 0
	for _, p := range grantorder.Candidates(pods, &fencingv1.FencedLeaseStatus{}, "") {
		if !named[p.UID] && !pending[p.UID] {
			n++
		}
	}
	for i := range pods {
		if uid := pods[i].UID; pending[uid] && !named[uid] {
			n++
		}
	}
	return n
}

// setSlotConditions says, for a FencedLease with slots, whether pods hold slots (Held)
// and whether it works as its spec asks (Ready): every slot held by a pod that renewed,
// or free with nobody waiting for it. A slot that a foreign Lease or a lock-delay keeps
// from granting (notes) says so, as a FencedLease of one grant does.
func setSlotConditions(st *fencingv1.FencedLeaseStatus, fl *fencingv1.FencedLease, held int, n int32, notes slotNotes) {
	var starting, free []string
	for _, s := range st.Slots {
		switch h := s.Holder; {
		case h == nil:
			free = append(free, fmt.Sprint(s.Slot))
		case h.FirstRenewTime == nil:
			starting = append(starting, fmt.Sprintf("slot %d (pod %s, token %d)", s.Slot, h.PodName, h.Token))
		}
	}
	summary := fmt.Sprintf("%d of %d slots held", held, n)
	if len(free) > 0 {
		summary += "; free: slot " + strings.Join(free, ", ")
	}
	if held > 0 {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: fencingv1.ConditionHeld, Status: metav1.ConditionTrue,
			ObservedGeneration: fl.Generation, Reason: fencingv1.ReasonGranted, Message: summary})
	}
	blocked, isBlocked := notes.blocking()
	if held == 0 {
		// Why none holds: the reasons of a single grant, or what keeps a slot from granting.
		SetHeldCondition(st, fl, "", false)
		if isBlocked && (blocked.reason == fencingv1.ReasonLeaseConflict || st.Waiting > 0) {
			meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: fencingv1.ConditionHeld, Status: metav1.ConditionFalse,
				ObservedGeneration: fl.Generation, Reason: blocked.reason, Message: blocked.message})
		}
	}
	ready := metav1.Condition{Type: fencingv1.ConditionReady, ObservedGeneration: fl.Generation, Status: metav1.ConditionFalse}
	switch {
	case held > 0 && isBlocked && blocked.reason == fencingv1.ReasonLeaseConflict:
		ready.Reason, ready.Message = blocked.reason, summary+"; "+blocked.message
	case len(starting) > 0:
		ready.Reason = fencingv1.ReasonHolderStarting
		ready.Message = summary + "; not renewed yet: " + strings.Join(starting, ", ")
	case held > 0 && (len(free) == 0 || st.Waiting == 0 || fl.Spec.Suspend):
		ready.Status, ready.Reason, ready.Message = metav1.ConditionTrue, fencingv1.ReasonHeld, summary
	case held > 0 && isBlocked:
		ready.Reason, ready.Message = blocked.reason, fmt.Sprintf("%s; %d pod(s) waiting; %s", summary, st.Waiting, blocked.message)
	case held > 0:
		ready.Reason = fencingv1.ReasonWaiting
		ready.Message = fmt.Sprintf("%s; %d pod(s) waiting", summary, st.Waiting)
	default:
		SetReadyCondition(st, fl)
		return
	}
	meta.SetStatusCondition(&st.Conditions, ready)
}

// sameSlotStatus is true when writing slot i as view status v decided it would change
// nothing in the status pass p projects. It compares without merging the whole status
// (WithSlot): the slot and the counters, then what the status says of the whole
// FencedLease, judged once until a decision moves it (SlotPass.finished).
func sameSlotStatus(p *SlotPass, i int32, v *fencingv1.FencedLeaseStatus) bool {
	st := &p.Next.Status
	at := slices.IndexFunc(st.Slots, func(s fencingv1.Slot) bool { return s.Slot == i })
	if at < 0 || st.Holder != nil || st.LastRevocation != nil {
		merged := WithSlot(p.Next, i, v)
		p.finish(&merged)
		return equality.Semantic.DeepEqual(merged, *st)
	}
	// The view's counter carries the floor of the other slots' Leases (N2): only the
	// slot's own grants raise the status's counter by themselves.
	merged := mergedSlot(st, i, v)
	own := merged.LastToken
	if rv := v.LastRevocation; rv != nil {
		own = max(own, rv.Token)
	}
	same := equality.Semantic.DeepEqual(merged, st.Slots[at]) && max(st.FencingToken, own) == st.FencingToken &&
		v.Transitions == st.Transitions && v.Revocations == st.Revocations && v.ObservedGeneration == st.ObservedGeneration
	return same && p.finished()
}

// finish recomputes what status st says of the whole FencedLease (FinishSlots) from what
// the pass saw.
func (p *SlotPass) finish(st *fencingv1.FencedLeaseStatus) {
	FinishSlots(st, p.Next, p.Pods, p.notes, p.pending)
}

// finished: the status the pass projects says of the whole FencedLease what FinishSlots
// computes from it; remembered until a decision changes the projection or the notes.
func (p *SlotPass) finished() bool {
	if p.finishedNow == nil {
		st := *p.Next.Status.DeepCopy()
		p.finish(&st)
		ok := equality.Semantic.DeepEqual(st, p.Next.Status)
		p.finishedNow = &ok
	}
	return *p.finishedNow
}

// SlotRecorded is the highest token status st records for slot j's grants: its last
// recorded grant's (held, released or revoked), its holder's, its last revocation's.
func SlotRecorded(st *fencingv1.FencedLeaseStatus, j int32) int64 {
	s := SlotOf(st, j)
	t := s.LastToken
	if s.Holder != nil {
		t = max(t, s.Holder.Token)
	}
	if s.LastRevocation != nil {
		t = max(t, s.LastRevocation.Token)
	}
	return t
}

// Unchanged is true when writing status st would change nothing.
func (w World) Unchanged(st *fencingv1.FencedLeaseStatus) bool {
	if w.Slot.Sharded {
		return sameSlotStatus(w.Slot.Pass, w.Slot.Index, st)
	}
	return equality.Semantic.DeepEqual(*st, w.FL.Status)
}
