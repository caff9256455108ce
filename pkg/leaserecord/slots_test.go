package leaserecord

import (
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// N1: slot 0's Lease is the FencedLease's own, slot k's <name>-slot-k, and only those.
func TestSlotOfLease(t *testing.T) {
	for name, want := range map[string]int32{"inv": 0, "inv-slot-1": 1, "inv-slot-12": 12} {
		if got, ok := SlotOfLease("inv", name); !ok || got != want {
			t.Errorf("SlotOfLease(%q) = %d, %v; want %d", name, got, ok, want)
		}
	}
	for _, name := range []string{"inv-slot-0", "inv-slot-01", "inv-slot--1", "inv-slot-x", "inv-slot-", "invx", "other", "inv-slot-1-slot-2"} {
		if got, ok := SlotOfLease("inv", name); ok {
			t.Errorf("SlotOfLease(%q) = %d: not a slot's Lease of inv", name, got)
		}
	}
}

// MarkSlot writes the label Read takes the slot from, slot 0's too.
func TestMarkSlotIsReadBack(t *testing.T) {
	for _, slot := range []int32{0, 1, 7} {
		l := &coordinationv1.Lease{}
		MarkSlot(l, slot)
		if r := Read(l); !r.InSlots || r.Slot != slot {
			t.Errorf("MarkSlot(%d) read back as slot %d, in slots %v", slot, r.Slot, r.InSlots)
		}
	}
}

// N2: the floor is the highest token on any Lease of the FencedLease, and none of another's.
func TestSlotsFloor(t *testing.T) {
	lease := func(name, label, token string) coordinationv1.Lease {
		return coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels: map[string]string{fencingv1.LeaseLabel: label}, Annotations: map[string]string{fencingv1.TokenAnnotation: token}}}
	}
	slots := ReadSlots([]coordinationv1.Lease{
		lease("inv", "inv", "4"),
		lease("inv-slot-2", "inv", "9"),    // a slot no longer in spec.holders: its tombstone counts
		lease("inv-slot-3", "other", "50"), // not labeled as inv's
		lease("invoices", "invoices", "70"),
		lease("inv-slot-x", "inv", "60"), // not a slot's name
	}, "inv")
	if len(slots) != 2 || slots[0].Token != 4 || slots[2].Token != 9 {
		t.Fatalf("ReadSlots = %+v, want slots 0 (token 4) and 2 (token 9)", slots)
	}
	if f := slots.Floor(); f != 9 {
		t.Errorf("Floor = %d, want 9", f)
	}
	if f := (Slots{}).Floor(); f != 0 {
		t.Errorf("the floor of no Lease is %d", f)
	}
}
