package fence

import "strconv"

// SlotHeader carries, beside Header, the slot of a FencedLease with slots
// (spec.holders above 1) that the request's token was granted in.
const SlotHeader = "Fencing-Slot"

// ForSlot is the resource a shard's writes are fenced under: resource, per slot. The
// tokens of one FencedLease rise across all its slots, so a resource fenced once for all
// of them would refuse every slot but the newest grant's; fenced per slot, each shard's
// resource refuses only an older holder of its own slot. Every fence of this package and
// its subpackages keys the stored token by the resource it is given, so passing
// ForSlot(resource, slot) fences per resource and slot.
func ForSlot(resource string, slot int32) string {
	return resource + "/slot-" + strconv.Itoa(int(slot))
}
