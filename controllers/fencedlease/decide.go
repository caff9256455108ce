package fencedlease

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// Release reasons (a release ends a grant without fault; a revocation takes it away).
const (
	releasePodFinished  = "PodFinished"
	releasePodDeleted   = "PodDeleted"
	releaseLeaseCleared = "LeaseReleased"
)

// world is what a reconcile observed.
type world struct {
	fl    *fencingv1.FencedLease
	lease *coordinationv1.Lease // nil when there is none yet
	pods  []corev1.Pod          // every pod labeled for this FencedLease
	// renewal is the tracker's view of the current holder's renewals; zero without holder.
	renewal renewal
	// now is the controller's clock; it carries a monotonic reading in production.
	now time.Time
}

// decision is the next status and what changed on the way there.
type decision struct {
	status  fencingv1.FencedLeaseStatus
	granted *fencingv1.Holder
	// grantedPodCreated is when the granted pod was created, for the wait-time metric.
	grantedPodCreated time.Time
	revoked           *fencingv1.Revocation
	released          *release
	// lateness is how long after the exact expiry a revocation was decided.
	lateness time.Duration
	// requeueAfter is the time left on the current grant; zero when none.
	requeueAfter time.Duration
}

type release struct {
	holder fencingv1.Holder
	reason string
}

// decide computes the next status from what was observed. It is pure: all writes
// happen after it, starting with the status it returns.
func decide(w world) decision {
	fl := w.fl
	d := decision{status: *fl.Status.DeepCopy()}
	st := &d.status
	st.ObservedGeneration = fl.Generation
	// Adopt the Lease's high-water token: a re-created FencedLease continues above it.
	st.FencingToken = max(st.FencingToken, parseToken(leaseAnnotations(w.lease)))

	if h := st.Holder; h != nil {
		switch reason := releaseReason(w, h); {
		case reason != "":
			d.released = &release{holder: *h, reason: reason}
			st.Holder = nil
		case fl.DeletionTimestamp != nil:
			d.revoke(w, fencingv1.ReasonFencedLeaseDeleted, 0)
		default:
			deadline := w.renewal.observedAt.Add(leaseDuration(fl))
			if left := deadline.Sub(w.now); left > 0 {
				d.requeueAfter = left
				if w.renewal.renewTime != nil {
					h.LastRenewTime = microTime(w.renewal.observedAt)
				}
			} else {
				d.revoke(w, fencingv1.ReasonLeaseExpired, -left)
			}
		}
	}

	var ended types.UID
	if d.released != nil {
		ended = d.released.holder.PodUID
	}
	waiting := candidates(w.pods, st, ended)
	if st.Holder == nil && !fl.Spec.Suspend && fl.DeletionTimestamp == nil && len(waiting) > 0 {
		next := waiting[0]
		waiting = waiting[1:]
		st.FencingToken++
		st.Transitions++
		st.Holder = &fencingv1.Holder{
			PodName:       next.Name,
			PodUID:        next.UID,
			Token:         st.FencingToken,
			AcquireTime:   *microTime(w.now),
			LastRenewTime: microTime(w.now),
		}
		d.granted = st.Holder.DeepCopy()
		d.grantedPodCreated = next.CreationTimestamp.Time
		d.requeueAfter = leaseDuration(fl)
	}
	st.Waiting = int32(len(waiting))
	setHeldCondition(st, fl)
	return d
}

func (d *decision) revoke(w world, reason fencingv1.RevocationReason, lateness time.Duration) {
	h := d.status.Holder
	d.revoked = &fencingv1.Revocation{
		PodName: h.PodName,
		PodUID:  h.PodUID,
		Token:   h.Token,
		Reason:  reason,
		Time:    *microTime(w.now),
	}
	d.lateness = lateness
	d.status.LastRevocation = d.revoked
	d.status.Revocations++
	d.status.Holder = nil
}

// releaseReason says why the holder's grant ended without fault, or "" if it did not.
// A terminating holder keeps its grant until it is gone: its containers may still run.
func releaseReason(w world, h *fencingv1.Holder) string {
	pod := findPod(w.pods, h.PodName)
	switch {
	case pod == nil || pod.UID != h.PodUID:
		return releasePodDeleted
	case finished(pod):
		return releasePodFinished
	case leaseReleasedBy(w.lease, h):
		return releaseLeaseCleared
	}
	return ""
}

// leaseReleasedBy is true when the Lease carries the holder's token but no holder: the
// holder cleared holderIdentity itself. A Lease that does not yet carry the token is a
// grant the controller has not finished writing, not a release.
func leaseReleasedBy(l *coordinationv1.Lease, h *fencingv1.Holder) bool {
	return l != nil && parseToken(l.Annotations) == h.Token &&
		(l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "")
}

// leaseShows is true when the Lease names exactly this grant: pod, UID and token.
func leaseShows(l *coordinationv1.Lease, h *fencingv1.Holder) bool {
	return l != nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == h.PodName &&
		l.Annotations[fencingv1.HolderUIDAnnotation] == string(h.PodUID) &&
		parseToken(l.Annotations) == h.Token
}

func leaseDuration(fl *fencingv1.FencedLease) time.Duration {
	s := fl.Spec.LeaseDurationSeconds
	if s <= 0 {
		s = 15
	}
	return time.Duration(s) * time.Second
}

func leaseAnnotations(l *coordinationv1.Lease) map[string]string {
	if l == nil {
		return nil
	}
	return l.Annotations
}

// microTime drops the monotonic reading and what the API would not store, so a status
// decided twice from the same observation compares equal.
func microTime(t time.Time) *metav1.MicroTime {
	m := metav1.NewMicroTime(t.Round(0).Truncate(time.Microsecond))
	return &m
}
