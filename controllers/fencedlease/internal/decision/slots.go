package decision

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/pkg/leaserecord"
)

// Every FencedLease is judged slot by slot (pass.go): slot 0 alone for one of one grant,
// whose view is the FencedLease itself; with slots (spec.holders above 1), each slot as a
// FencedLease of one grant, its view carrying the slot's holder and last revocation in
// status.holder and status.lastRevocation, and the FencedLease's token counter, so the
// rules, the plan and the writers of a single grant serve every slot unchanged. What
// differs is framed here: the slot's Lease, which pods the slot may see, whether it may
// grant, and how its status is merged into the one the pass writes (slotstatus.go).

// SlotFrame is the slot a pass judges (SlotPass.frame). Slot 0 of a FencedLease without
// slots is not sharded: its view is the FencedLease itself.
type SlotFrame struct {
	Index int32
	// Sharded: the FencedLease has slots; its status lists them (status.slots).
	Sharded bool
	// Recorded is the highest token the status records for this slot's grants
	// (SlotRecorded): a grant on its Lease above it is one the status does not record yet.
	Recorded int64
	// Retired: the slot is at or above spec.holders: it grants no one, and its holder
	// is asked to hand off.
	Retired bool
	// Ordinal: only the pod whose StatefulSet index is index may be granted this slot.
	Ordinal bool
	// NoGrant: an earlier slot of this pass could not be judged (its view was behind this
	// process's own writes): this one judges its holder but grants no one, so it never
	// takes the pod the earlier slot would have.
	NoGrant bool
	// others are the pods another slot holds, last revoked, or names on its Lease, or
	// that this pass granted another slot: never this slot's candidates, and never
	// demoted by this slot's writes.
	others Others
	// othersHeld: another slot still has a holder, so a deleted FencedLease keeps its
	// finalizer.
	othersHeld bool
	// Pass is what the slots of this pass share (slotpass.go).
	Pass *SlotPass
}

// sharded is true for a FencedLease with slots: spec.holders above 1, or a status that
// still lists slots (holders lowered to 1, the removed slots not yet drained).
func sharded(fl *fencingv1.FencedLease) bool {
	return fl.Spec.Holders > 1 || len(fl.Status.Slots) > 0
}

// HoldersOf is spec.holders; omitted is 1.
func HoldersOf(fl *fencingv1.FencedLease) int32 {
	return max(fl.Spec.Holders, 1)
}

// LeaseKey is the key of the slot's Lease.
func (s SlotFrame) LeaseKey(fl *fencingv1.FencedLease) types.NamespacedName {
	return types.NamespacedName{Namespace: fl.Namespace, Name: fencingv1.SlotLeaseName(fl.Name, s.Index)}
}

// SlotKey names one slot of a FencedLease in the grant memory; a FencedLease without
// slots is slot 0, so its memory survives the change to slots and back.
type SlotKey struct {
	Lease types.NamespacedName
	Slot  int32
}

// MemoryKey is the key the grant memory keeps the slot's grants under.
func (s SlotFrame) MemoryKey(key types.NamespacedName) SlotKey {
	return SlotKey{key, s.Index}
}

// SlotLease names the Lease of one slot of one FencedLease, by the FencedLease's UID: a
// FencedLease re-created under the same name is another owner.
type SlotLease struct {
	Owner types.UID
	slot  int32
}

// LeaseOwner is who the slot's Lease is recorded as created for (ownWrites).
func (s SlotFrame) LeaseOwner(fl *fencingv1.FencedLease) SlotLease {
	return SlotLease{fl.UID, s.Index}
}

// Visible are the pass's pods this slot may see: all but the others'.
func (s SlotFrame) Visible() []*corev1.Pod { return s.visibleOf(s.Pass.pods) }

// VisibleCandidates are the pass's candidates this slot may see, in grant order.
func (s SlotFrame) VisibleCandidates() []*corev1.Pod { return s.visibleOf(s.Pass.candidates) }

// visibleOf are the pods of pods, in their order, that no other slot names.
func (s SlotFrame) visibleOf(pods []*corev1.Pod) []*corev1.Pod {
	if s.others.none() {
		return pods
	}
	out := make([]*corev1.Pod, 0, len(pods))
	for _, p := range pods {
		if !s.others.Has(p.UID) {
			out = append(out, p)
		}
	}
	return out
}

// MayGrant filters waiting, the candidates in grant order, to those this slot may be
// granted: none for a retired slot; under Ordinal, the pod of its index alone.
func (s SlotFrame) MayGrant(waiting []*corev1.Pod) []*corev1.Pod {
	switch {
	case s.Retired || s.NoGrant:
		return nil
	case !s.Ordinal:
		return waiting
	}
	var out []*corev1.Pod
	for _, p := range waiting {
		if i, ok := podIndex(p); ok && i == s.Index {
			out = append(out, p)
		}
	}
	return out
}

// podIndex is a StatefulSet pod's index: its apps.kubernetes.io/pod-index label.
func podIndex(p *corev1.Pod) (int32, bool) {
	v, ok := p.Labels["apps.kubernetes.io/pod-index"]
	if !ok {
		return 0, false
	}
	i, err := strconv.ParseInt(v, 10, 32)
	if err != nil || i < 0 {
		return 0, false
	}
	return int32(i), true
}

// SlotPass is what the slots of one pass share.
type SlotPass struct {
	// FL is the FencedLease as the pass read it, then as it wrote it; pods are its labeled
	// pods as the pass began.
	FL   *fencingv1.FencedLease
	Pods []corev1.Pod
	// First, when HasFirst, is the slot judged first: the one whose timer the last pass
	// set (GrantMemory.Due).
	First    int32
	HasFirst bool
	// Sharded: fl has slots (status.slots); otherwise its one grant is slot 0, recorded in
	// status.holder.
	Sharded bool
	// Next is fl with the status the decisions of this pass project so far: each slot that
	// records its decision merges it in (WithSlot), in order, so a later slot's view counts
	// on it; the pass writes it once.
	Next *fencingv1.FencedLease
	// Floor is the highest token any slot's Lease carried when the pass began, or a slot
	// of this pass decided: no slot grants one at or below it, whether or not the status
	// records it yet (a grant made on its Lease first).
	Floor int64
	// OnLease is what each slot's Lease named when the pass began; pending the pods of
	// the grants there that the status does not record yet.
	OnLease leaserecord.Slots
	pending map[types.UID]bool
	// Claimed are, per slot judged in this pass, the pods its decision names: the grant
	// that ended and the one that holds now.
	Claimed map[int32][]types.UID
	// notes are what keeps each slot judged in this pass from granting (slotNotes).
	notes slotNotes
	// candidates are the candidates among pods in grant order, whatever a status names
	// (grantorder.Candidates): sorted once a pass, filtered by each slot.
	candidates []*corev1.Pod
	// pods points into Pods, for the slots' views of them (SlotFrame.Visible).
	pods []*corev1.Pod
	// named are, per pod, the slots that name it, and held the slots with a holder
	// (SlotPass.index); nil until asked, and again once a decision changes Next.
	named map[types.UID][]int32
	held  map[int32]bool
	// finishedNow caches SlotPass.finished until the projection or the notes change; nil:
	// not judged yet.
	finishedNow *bool
	// Finalized: a slot releases the finalizer of the deleted FencedLease.
	Finalized bool
	// Skipped: a slot could not be judged (its view was behind this controller's own
	// writes), or granted a token the status write is the first to record
	// (grantsInStatus), so the slots after it grant no one in this pass.
	Skipped bool
}

// slotNotes are, per slot, what keeps it from granting that only its own pass saw: its
// view's Held reason and message when that is LeaseConflict (a Lease of the slot's name
// the operator did not create, A3) or RevocationDelayed (its lock-delay, X8).
type slotNotes map[int32]slotNote

type slotNote struct{ reason, message string }

// note keeps slot i's Held reason from status v when it blocks the slot, and drops an
// older one otherwise.
// It says whether that changed the notes.
func (n slotNotes) note(i int32, v *fencingv1.FencedLeaseStatus) bool {
	was, had := n[i]
	c := meta.FindStatusCondition(v.Conditions, fencingv1.ConditionHeld)
	if c != nil && (c.Reason == fencingv1.ReasonLeaseConflict || c.Reason == fencingv1.ReasonRevocationDelayed) {
		n[i] = slotNote{c.Reason, c.Message}
		return !had || was != n[i]
	}
	delete(n, i)
	return had
}

// blocking is the note of the lowest slot kept from granting, a LeaseConflict (which
// needs a user) before a lock-delay (which passes), its message naming the slot; false
// when none is.
func (n slotNotes) blocking() (slotNote, bool) {
	var out slotNote
	at, found := int32(0), false
	for i, c := range n {
		better := !found || c.reason == fencingv1.ReasonLeaseConflict && out.reason != fencingv1.ReasonLeaseConflict ||
			c.reason == out.reason && i < at
		if better {
			out, at, found = c, i, true
		}
	}
	out.message = fmt.Sprintf("slot %d: %s", at, out.message)
	return out, found
}
