package decision

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/internal/grantorder"
	"github.com/fencedlease/fencedlease/pkg/leaserecord"
)

// NewSlotPass is the pass over fl's slots, given its labeled pods and the records of every
// Lease the operator made for it: the token floor is the highest they carry, so a
// re-created FencedLease continues above the tokens of slots it no longer has.
func NewSlotPass(fl *fencingv1.FencedLease, pods []corev1.Pod, onLease leaserecord.Slots) *SlotPass {
	p := &SlotPass{FL: fl, Next: fl.DeepCopy(), Pods: pods, OnLease: onLease, Floor: onLease.Floor(), Claimed: map[int32][]types.UID{}, notes: slotNotes{}}
	p.candidates = grantorder.Candidates(pods, &fencingv1.FencedLeaseStatus{}, "")
	p.pods = make([]*corev1.Pod, len(pods))
	for i := range pods {
		p.pods[i] = &pods[i]
	}
	// A FencedLease whose status never listed slots (spec.holders lowered to 1 before any
	// slot's status write landed) yet a slot's Lease records a grant: its slots are judged.
	p.Sharded = sharded(fl) || grantAboveSlot0(onLease)
	p.pending = map[types.UID]bool{}
	for j, rec := range onLease {
		if rec.Holder != "" && rec.GrantAbove(SlotRecorded(&fl.Status, j)) {
			p.pending[rec.HolderUID] = true
		}
	}
	return p
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

// Frame is slot i as this pass judges it.
func (p *SlotPass) Frame(i int32) SlotFrame {
	fl := p.FL
	s := SlotFrame{Index: i, Pass: p, NoGrant: p.Skipped, Recorded: SlotRecorded(&fl.Status, i)}
	if p.Sharded {
		s.Sharded, s.Retired, s.Ordinal = true, i >= HoldersOf(fl), fl.Spec.SlotAssignment == fencingv1.SlotAssignmentOrdinal
	}
	s.others, s.othersHeld = p.OthersOf(i)
	return s
}

// View is what slot i judges: the FencedLease itself for one grant, else the slot's view
// of it (SlotView) as the earlier slots of this pass left it.
func (p *SlotPass) View(i int32) *fencingv1.FencedLease {
	if !p.Sharded {
		return p.Next.DeepCopy()
	}
	return SlotView(p.Next, i, p.Floor)
}

// Indices are the slots the pass judges: those of the status (SlotIndices), and any
// whose Lease names a grant the status does not list (made on the Lease just before
// spec.holders was lowered): that grant is adopted and asked to hand off like any.
func (p *SlotPass) Indices() []int32 {
	if !p.Sharded {
		return []int32{0}
	}
	out := SlotIndices(p.FL)
	for i, rec := range p.OnLease {
		if rec.HasHolderUID && !slices.Contains(out, i) {
			out = append(out, i)
		}
	}
	slices.Sort(out)
	if i := slices.Index(out, p.First); p.HasFirst && i > 0 {
		// The slot whose timer brought this pass first: its revocation waits for no other
		// slot's judging (N5). Any order is one the pass decides in, and lands in.
		copy(out[1:i+1], out[:i])
		out[0] = p.First
	}
	return out
}

// OthersOf are the pods the slots other than i name — holder, last revoked, hand-off
// successor; in the status, on their Lease, or in a decision of this pass — and whether
// one of them has a holder still.
func (p *SlotPass) OthersOf(i int32) (Others, bool) {
	p.index()
	held := len(p.held)
	if p.held[i] {
		held--
	}
	return Others{p.named, i}, held > 0
}

// index finds, once a pass and again after a decision changed the projection, which
// slots name each pod and which have a holder; Decided adds what each decision claims.
func (p *SlotPass) index() {
	if p.named != nil {
		return
	}
	p.named, p.held = map[types.UID][]int32{}, map[int32]bool{}
	for _, s := range p.Next.Status.Slots {
		if s.Holder != nil {
			p.name(s.Slot, s.Holder.PodUID)
			p.held[s.Slot] = true
			if ho := s.Holder.Handoff; ho != nil {
				p.name(s.Slot, ho.SuccessorUID) // one slot's successor is no other slot's
			}
		}
		if s.LastRevocation != nil {
			p.name(s.Slot, s.LastRevocation.PodUID)
		}
	}
	if len(p.Next.Status.Slots) == 0 {
		// Slots only now: slot 0 is the status's single grant.
		if h := p.Next.Status.Holder; h != nil {
			p.name(0, h.PodUID)
			p.held[0] = true
		}
		if rv := p.Next.Status.LastRevocation; rv != nil {
			p.name(0, rv.PodUID)
		}
	}
	for j, rec := range p.OnLease {
		if !rec.HasHolderUID {
			continue
		}
		p.name(j, rec.HolderUID) // named on its Lease, or released there and not yet recorded
		if rec.Holder != "" && rec.GrantAbove(SlotRecorded(&p.FL.Status, j)) {
			p.held[j] = true // a grant only its Lease records (G2): its pod may be at work
		}
	}
	for j, uids := range p.Claimed {
		for _, uid := range uids {
			p.name(j, uid)
		}
	}
}

// name records that slot j names pod uid.
func (p *SlotPass) name(j int32, uid types.UID) {
	if uid != "" && !slices.Contains(p.named[uid], j) {
		p.named[uid] = append(p.named[uid], j)
	}
}

// claim records that slot i's decision names pod uid (SlotPass.Claimed).
func (p *SlotPass) claim(i int32, uid types.UID) {
	p.Claimed[i] = append(p.Claimed[i], uid)
	if p.named != nil {
		p.name(i, uid)
	}
}

// Others are the pods the slots other than one name (SlotPass.OthersOf).
type Others struct {
	named map[types.UID][]int32
	slot  int32
}

// Has is true when a slot other than this one names pod uid.
func (o Others) Has(uid types.UID) bool {
	for _, j := range o.named[uid] {
		if j != o.slot {
			return true
		}
	}
	return false
}

// none is true when no other slot names any pod.
func (o Others) none() bool {
	for _, slots := range o.named {
		for _, j := range slots {
			if j != o.slot {
				return false
			}
		}
	}
	return true
}

// Decided records slot i's decision d, taken on w: the pods it names, the token floor it
// raised, and — when it changes the status (records) — its status in the projection the pass writes.
func (p *SlotPass) Decided(i int32, w World, d Decision, records bool) {
	p.Floor = max(p.Floor, d.Status.FencingToken)
	if h := w.FL.Status.Holder; h != nil {
		p.claim(i, h.PodUID)
	}
	if h := d.Status.Holder; h != nil {
		p.claim(i, h.PodUID)
		if ho := h.Handoff; ho != nil && ho.SuccessorUID != "" {
			p.claim(i, ho.SuccessorUID)
		}
	}
	if p.notes.note(i, &d.Status) {
		p.finishedNow = nil
	}
	p.Finalized = d.Plan.Has(ReleaseFinalizer)
	p.Skipped = p.Skipped || grantsInStatus(w, d)
	if !records {
		return
	}
	p.finishedNow, p.named = nil, nil
	if p.Sharded {
		p.Next.Status = WithSlot(p.Next, i, &d.Status)
		p.finish(&p.Next.Status)
	} else {
		p.Next.Status = *d.Status.DeepCopy()
	}
}

// Projected is the status the pass writes: every recorded decision, and what the status
// says of the whole FencedLease recomputed for a FencedLease with slots.
func (p *SlotPass) Projected() *fencingv1.FencedLease {
	next := p.Next.DeepCopy()
	next.ResourceVersion = p.FL.ResourceVersion
	if p.Sharded {
		p.finish(&next.Status)
	}
	return next
}

// newToken is the token decision d grants that no Lease carries yet; 0 when it grants
// none (or adopts one its Lease carries).
func newToken(w World, d Decision) int64 {
	if h := d.Granted(); h != nil && h.Token > w.Record.Token {
		return h.Token
	}
	return 0
}

// GrantsOnLease: the decision's new token lands on the slot's Lease before the status
// write — handed over in its compare-and-swap, or granted there with the status waiting.
func GrantsOnLease(w World, d Decision) bool {
	return newToken(w, d) > 0 && (d.handsOver() || !d.Plan.Has(WriteStatus))
}

// grantsInStatus: the decision's new token is first recorded by the status write.
func grantsInStatus(w World, d Decision) bool {
	return newToken(w, d) > 0 && !GrantsOnLease(w, d)
}

// grantStep is the step of decision d that carries its new token to the Lease.
func grantStep(d Decision) StepKind {
	if d.handsOver() {
		return CutLease
	}
	return WriteLease
}
