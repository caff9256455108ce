package leaserecord

import (
	"strconv"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// A FencedLease with slots (spec.holders above 1) has a Lease per slot: slot 0's is the
// FencedLease's own, slot k's is fencingv1.SlotLeaseName(name, k); each is labeled with
// its slot, slot 0's too, so a holder learns from the Lease it is granted on which slot
// it holds.

// MarkSlot labels l as the Lease of slot.
func MarkSlot(l *coordinationv1.Lease, slot int32) {
	if l.Labels == nil {
		l.Labels = map[string]string{}
	}
	l.Labels[fencingv1.SlotLabel] = strconv.Itoa(int(slot))
}

// SlotOfLease is the slot whose Lease is named leaseName, for FencedLease fencedLease,
// and false when that name is no slot's Lease of it.
func SlotOfLease(fencedLease, leaseName string) (int32, bool) {
	if leaseName == fencedLease {
		return 0, true
	}
	n, ok := strings.CutPrefix(leaseName, fencedLease+"-slot-")
	if !ok {
		return 0, false
	}
	i, err := strconv.ParseInt(n, 10, 32)
	if err != nil || i < 1 || fencingv1.SlotLeaseName(fencedLease, int32(i)) != leaseName {
		return 0, false
	}
	return int32(i), true
}

// Slots are the records of a FencedLease's Leases, by slot.
type Slots map[int32]Record

// ReadSlots reads, among leases, those FencedLease fencedLease made: labeled with its
// name, and named as one of its slots' Leases.
func ReadSlots(leases []coordinationv1.Lease, fencedLease string) Slots {
	out := Slots{}
	for i := range leases {
		l := &leases[i]
		if l.Labels[fencingv1.LeaseLabel] != fencedLease {
			continue
		}
		if slot, ok := SlotOfLease(fencedLease, l.Name); ok {
			out[slot] = Read(l)
		}
	}
	return out
}

// Floor is the highest token any of the Leases carries: the FencedLease grants above it,
// so a token is never granted twice, even by one re-created with fewer slots (N2).
func (s Slots) Floor() int64 {
	var floor int64
	for _, r := range s {
		floor = max(floor, r.Token)
	}
	return floor
}
