package decision

import (
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/pkg/leaserecord"
)

// LeaseShowing is lease as it shows status st of fl: the holder (G2) or no holder, and
// always the high-water token — of slot s, for a FencedLease with slots: its holder's,
// or the last it carried (the counter's high-water is in the status and on the Lease of
// the slot that granted it).
func LeaseShowing(fl *fencingv1.FencedLease, s SlotFrame, st *fencingv1.FencedLeaseStatus, lease *coordinationv1.Lease, last Renewal) *coordinationv1.Lease {
	want := lease.DeepCopy()
	rec := leaserecord.Read(lease)
	token := st.FencingToken
	if s.Sharded {
		token = rec.Token
	}
	if st.Holder != nil {
		// The holder's own token, which its library reads off the Lease and would stop
		// on any other; never below the Lease's.
		token = max(st.Holder.Token, rec.Token)
	}
	tokenChanges := leaserecord.Own(want, fl.Name, token)
	if s.Sharded {
		// Slot 0's too: a holder learns from the Lease it is granted on that it holds a
		// slot, and which (leaserecord.Record.InSlots).
		leaserecord.MarkSlot(want, s.Index)
	}
	switch h := st.Holder; {
	case h != nil && WaitingOutCutOff(rec, fl, h):
		// Cut off (hand-off grace period over, or revoke requested): the Lease stays
		// without a holder, so the holder's renewals are refused until it is revoked.
	case h != nil && rec.ReleasedBy(h.Token) && rec.HolderUID == h.PodUID:
		// Adopted off the Lease after its holder released it (adoptRule): never named
		// again; the next pass records the release (L2).
	case h != nil:
		g := leaserecord.Grant{Holder: h.PodName, HolderUID: h.PodUID, Token: h.Token, AcquireTime: h.AcquireTime,
			DurationSeconds: int32(GrantDuration(h, fl).Seconds())}
		if h.Handoff != nil {
			g.Successor = h.Handoff.SuccessorName // read by the holder from its next renewal
		}
		var renewedAt *metav1.MicroTime
		if last.UID == h.PodUID && last.Token == h.Token {
			// A repair after someone else rewrote this grant's Lease: never counted as the
			// holder's renewal.
			renewedAt = last.RenewTime
		}
		leaserecord.WriteGrant(want, g, renewedAt)
		if tokenChanges {
			leaserecord.CountTransition(want)
		}
	default:
		leaserecord.Vacate(want)
	}
	return want
}
