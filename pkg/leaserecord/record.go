// Package leaserecord is the encoding of the Lease that carries a FencedLease's grant,
// read and written in one place: the controller, pkg/holder, the agent's startupProbe and
// the kubectl plugin read the grant off a Lease through Read, so a state such as "the
// holder has started renewing" is derived once; the operator writes the Lease through Own,
// WriteGrant, Vacate and CutOff, a holder through Renew and Release.
//
// The encoding (README.md, "The API at a glance"): the Lease has the FencedLease's name and
// namespace and the label fencing.fencedlease.io/lease naming it; the annotation
// fencing.fencedlease.io/token carries the newest token (the high-water mark, kept after
// the grant ends: the tombstone); holderIdentity and the annotation
// fencing.fencedlease.io/holder-uid name the holder pod; acquireTime is when the grant
// was written and renewTime equals it until the holder first renews; the annotation
// fencing.fencedlease.io/successor asks the holder to hand off; the annotation
// fencing.fencedlease.io/cut-off-reason says why the operator cut a holder off.
package leaserecord

import (
	"strconv"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// Record is what a Lease says about its grant.
type Record struct {
	// Exists is false when there is no Lease; every other field is then zero.
	Exists bool
	// LeaseLabel is the value of the lease label: the FencedLease that created it.
	LeaseLabel string
	HasLabel   bool
	// Holder is holderIdentity, the holder pod's name; "" when none.
	Holder string
	// HolderUID is the holder pod's UID. The operator clears it only when it cuts the
	// holder off; a holder that releases clears holderIdentity alone.
	HolderUID    types.UID
	HasHolderUID bool
	// Token is the token annotation: the newest token written; 0 when missing or malformed.
	Token int64
	// AcquireTime and RenewTime as written; the operator's grant writes both equal.
	AcquireTime, RenewTime *metav1.MicroTime
	// DurationSeconds is leaseDurationSeconds; 0 when unset.
	DurationSeconds int32
	// Successor names the pod the holder is asked to hand off to; "" when not asked.
	Successor string
	// CutOffReason is why the operator cut the holder off, where only the Lease records
	// it (the cut-off-reason annotation); "" otherwise.
	CutOffReason string
	// Slot is the slot whose Lease this is (the slot label); InSlots is true when the
	// label is there: the Lease of a FencedLease with slots, slot 0's too. A holder
	// learns its slot from the Lease it is granted on, whatever spec.holders was when
	// its pod was admitted.
	Slot    int32
	InSlots bool
}

// Read reads l, which may be nil (no Lease).
func Read(l *coordinationv1.Lease) Record {
	if l == nil {
		return Record{}
	}
	r := Record{Exists: true, AcquireTime: l.Spec.AcquireTime, RenewTime: l.Spec.RenewTime,
		Token: ParseToken(l.Annotations), Successor: l.Annotations[fencingv1.SuccessorAnnotation],
		CutOffReason: l.Annotations[fencingv1.CutOffReasonAnnotation]}
	r.LeaseLabel, r.HasLabel = l.Labels[fencingv1.LeaseLabel]
	uid, has := l.Annotations[fencingv1.HolderUIDAnnotation]
	r.HolderUID, r.HasHolderUID = types.UID(uid), has
	if l.Spec.HolderIdentity != nil {
		r.Holder = *l.Spec.HolderIdentity
	}
	if raw, ok := l.Labels[fencingv1.SlotLabel]; ok {
		if s, err := strconv.ParseInt(raw, 10, 32); err == nil && s >= 0 {
			r.Slot, r.InSlots = int32(s), true
		}
	}
	if l.Spec.LeaseDurationSeconds != nil {
		r.DurationSeconds = *l.Spec.LeaseDurationSeconds
	}
	return r
}

// ParseToken reads a token annotation; a missing, malformed or negative one counts as 0.
func ParseToken(annotations map[string]string) int64 {
	v, err := strconv.ParseInt(annotations[fencingv1.TokenAnnotation], 10, 64)
	if err != nil || v < 0 {
		return 0
	}
	return v
}

// FormatToken writes a token as the annotation carries it.
func FormatToken(t int64) string { return strconv.FormatInt(t, 10) }

// Foreign is true for a Lease of the FencedLease's name that the operator did not
// create: it lacks the lease label naming fencedLease. The operator never adopts one.
func (r Record) Foreign(fencedLease string) bool {
	return r.Exists && (!r.HasLabel || r.LeaseLabel != fencedLease)
}

// Names is true when the Lease names grant (pod name, token): the holder's own test
// before each renewal. The pod name alone is never enough (a StatefulSet re-creates a
// pod under the same name).
func (r Record) Names(identity string, token int64) bool {
	return r.Holder != "" && r.Holder == identity && r.Token == token
}

// Shows is true when the Lease names exactly this grant: pod, UID and token.
func (r Record) Shows(identity string, uid types.UID, token int64) bool {
	return r.Names(identity, token) && r.HolderUID == uid
}

// Renewed is true when renewTime moved on from the acquireTime the operator's grant
// wrote: whoever the Lease names renewed at least once. Read off the Lease, it survives
// a controller restart and is the same in every binary.
func (r Record) Renewed() bool {
	return r.RenewTime != nil && (r.AcquireTime == nil || !r.RenewTime.Equal(r.AcquireTime))
}

// Started is true when the Lease names grant (identity, token) and it renewed at least
// once since it was made: its holder confirmed it.
func (r Record) Started(identity string, token int64) bool {
	return r.Names(identity, token) && r.Renewed()
}

// GrantRenewed is true when the Lease shows that grant (identity, uid, token) of
// FencedLease fencedLease renewed at least once: it names the grant renewed, or the
// grant was cut off or released after a renewal. The controller judges a grant started
// by it (with the status's first renewal), and so does the plugin: one that never renewed
// never ran.
func (r Record) GrantRenewed(fencedLease, identity string, uid types.UID, token int64) bool {
	switch r.State(fencedLease, identity, uid, token) {
	case StateRenewed:
		return true
	case StateCutOff, StateReleased:
		return r.Renewed()
	}
	return false
}

// Cleared is true when the Lease carries token but names no holder: the grant of token
// ended on the Lease, by the holder's release or by the operator's cut-off.
func (r Record) Cleared(token int64) bool {
	return r.Exists && r.Token == token && r.Holder == ""
}

// ReleasedBy is true when the holder of token cleared holderIdentity itself (the UID is
// still there; the admission policy keeps it from the holder).
func (r Record) ReleasedBy(token int64) bool { return r.Cleared(token) && r.HasHolderUID }

// CutOff is true when the operator cleared the holder of token (holder and UID): the
// revocation's compare-and-swap (X3), or a cut-off after a hand-off grace period or on a
// revoke request (C1). The holder can renew no more.
func (r Record) CutOff(token int64) bool { return r.Cleared(token) && !r.HasHolderUID }

// Ahead is true when the Lease names a grant (a holder and its UID) with a token above
// token: the operator's hand-over moved the grant on the Lease in one compare-and-swap,
// and a status that shows token does not record it yet.
func (r Record) Ahead(token int64) bool {
	return r.GrantAbove(token) && r.Holder != ""
}

// GrantAbove is true when the Lease carries a grant with a token above token, held or
// already released by its holder (its UID is kept until the operator records the
// release): the grant of token ended on the Lease, and a status that shows token records
// neither that end nor the grant after it.
func (r Record) GrantAbove(token int64) bool {
	return r.Exists && r.HasHolderUID && r.Token > token
}

// State is the Lease's state as seen from one FencedLease, relative to the grant of
// token (0: the status names no holder).
type State string

const (
	StateNone      State = "None"      // no Lease yet
	StateForeign   State = "Foreign"   // not created by the operator for this FencedLease
	StateTombstone State = "Tombstone" // the operator's, naming no grant: the high-water token only
	StateGranted   State = "Granted"   // names the grant; not renewed since it was written
	StateRenewed   State = "Renewed"   // names the grant, renewed at least once
	StateReleased  State = "Released"  // the holder of this grant released it
	StateCutOff    State = "CutOff"    // the operator cleared this grant's holder
	StateOther     State = "Other"     // names another grant (a half-written or stale one)
)

// State classifies the Lease for FencedLease fencedLease whose status names grant
// (identity, uid, token), or no grant when token is 0.
func (r Record) State(fencedLease, identity string, uid types.UID, token int64) State {
	switch {
	case !r.Exists:
		return StateNone
	case r.Foreign(fencedLease):
		return StateForeign
	case token != 0 && r.Shows(identity, uid, token) && r.Renewed():
		return StateRenewed
	case token != 0 && r.Shows(identity, uid, token):
		return StateGranted
	case token != 0 && r.ReleasedBy(token):
		return StateReleased
	case token != 0 && r.CutOff(token):
		return StateCutOff
	case r.Holder == "":
		return StateTombstone
	}
	return StateOther
}
