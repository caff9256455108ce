package leaserecord

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// The writers below change a Lease in place, each one step of the protocol, and are the
// only code that encodes the record: the operator's (Own, Grant, Vacate, CutOff) and the
// holder's (Renew, Release). Callers write the Lease with the resourceVersion they read.

// Grant is a grant as the Lease records it.
type Grant struct {
	// Holder and HolderUID name the pod; Token is its fencing token.
	Holder    string
	HolderUID types.UID
	Token     int64
	// AcquireTime is when the grant was made; DurationSeconds its lease duration.
	AcquireTime     metav1.MicroTime
	DurationSeconds int32
	// Successor names the pod the holder is asked to hand off to; "" when not asked.
	Successor string
}

// Own marks l as the operator's Lease of FencedLease fencedLease and records the
// high-water token, which it keeps after the grant ends (the tombstone). It says whether
// the token changed.
func Own(l *coordinationv1.Lease, fencedLease string, token int64) (tokenChanged bool) {
	if l.Labels == nil {
		l.Labels = map[string]string{}
	}
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Labels[fencingv1.LeaseLabel] = fencedLease
	tokenChanged = ParseToken(l.Annotations) != token
	l.Annotations[fencingv1.TokenAnnotation] = FormatToken(token)
	return tokenChanged
}

// WriteGrant makes l name grant g (G2), its hand-off request included. A Lease that does
// not show g yet gets g's acquireTime, and renewTime set to renewedAt — the grant's last
// renewal known, so rewriting a grant never counts as its holder's renewal — or, nil, to
// the acquireTime (not renewed). A Lease that shows g keeps its times: they are the
// holder's. Call Own first.
func WriteGrant(l *coordinationv1.Lease, g Grant, renewedAt *metav1.MicroTime) {
	shown := Read(l).Shows(g.Holder, g.HolderUID, g.Token)
	l.Spec.HolderIdentity = ptr.To(g.Holder)
	l.Annotations[fencingv1.HolderUIDAnnotation] = string(g.HolderUID)
	delete(l.Annotations, fencingv1.CutOffReasonAnnotation)
	l.Spec.LeaseDurationSeconds = ptr.To(g.DurationSeconds)
	if !shown {
		l.Spec.AcquireTime = g.AcquireTime.DeepCopy()
		l.Spec.RenewTime = g.AcquireTime.DeepCopy()
		if renewedAt != nil {
			l.Spec.RenewTime = renewedAt.DeepCopy()
		}
	}
	if g.Successor != "" {
		l.Annotations[fencingv1.SuccessorAnnotation] = g.Successor
	} else {
		delete(l.Annotations, fencingv1.SuccessorAnnotation)
	}
}

// CountTransition adds one to leaseTransitions: a new token was written.
func CountTransition(l *coordinationv1.Lease) {
	l.Spec.LeaseTransitions = ptr.To(ptr.Deref(l.Spec.LeaseTransitions, 0) + 1)
}

// Vacate leaves l naming no grant: the tombstone, with the high-water token Own wrote.
func Vacate(l *coordinationv1.Lease) {
	l.Spec.HolderIdentity = nil
	delete(l.Annotations, fencingv1.HolderUIDAnnotation)
	delete(l.Annotations, fencingv1.SuccessorAnnotation)
}

// CutOff clears l's holder and its UID, so the holder can renew no more (X3, C1), and
// records why (reason; "" records nothing): only the Lease can tell it until the status
// does, so a restarted operator finishes the revocation for the same reason.
func CutOff(l *coordinationv1.Lease, reason fencingv1.RevocationReason) {
	l.Spec.HolderIdentity = nil
	delete(l.Annotations, fencingv1.HolderUIDAnnotation)
	if reason != "" {
		if l.Annotations == nil {
			l.Annotations = map[string]string{}
		}
		l.Annotations[fencingv1.CutOffReasonAnnotation] = string(reason)
	}
}

// Renew is the holder's renewal sent at now (R1): renewTime becomes now at the field's
// precision (microseconds), or a microsecond later should that equal the current one (a
// clock that stood still, or was set back to that very moment). The operator counts a
// renewal when renewTime changes; an update that changed nothing would be seen by no one.
func Renew(l *coordinationv1.Lease, now time.Time) {
	t := now.Round(0).Truncate(time.Microsecond)
	if cur := l.Spec.RenewTime; cur != nil && cur.Time.Truncate(time.Microsecond).Equal(t) {
		t = t.Add(time.Microsecond)
	}
	l.Spec.RenewTime = &metav1.MicroTime{Time: t}
}

// Release is the holder's release (L2): it clears holderIdentity alone. The UID stays
// (the admission policy keeps it from the holder), so the operator tells a release from
// its own cut-off (ReleasedBy).
func Release(l *coordinationv1.Lease) {
	l.Spec.HolderIdentity = nil
}
