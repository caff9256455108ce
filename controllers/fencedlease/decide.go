package fencedlease

import (
	"math"
	"slices"
	"strconv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
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
	// holder is the pod status.holder names, confirmed by UID: from pods, or read
	// uncached by name when it is not among them. nil when it is gone.
	holder *corev1.Pod
	// unlabeled are pods outside pods that the projection must still reach: a holder
	// that lost its label, or the pod of a LabelRemoved revocation not yet finished.
	unlabeled []corev1.Pod
	// renewal is the tracker's view of the current holder's renewals; zero without holder.
	renewal renewal
	// successor is a waiting pod of a newer revision of the holder's own Deployment or
	// StatefulSet; looked up only while the holder has not been asked to hand off.
	successor *corev1.Pod
	// handoffSince is when this process first saw the holder asked to hand off.
	handoffSince time.Time
	// now is the controller's clock, read before the Lease; it carries a monotonic
	// reading in production.
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
	// cutOff: the hand-off grace period is over. The Lease stops naming the holder, so it
	// can renew no more; it is revoked when its lease runs out.
	cutOff bool
	// asked: this decision asked the holder to hand off, at now (the clock read that
	// starts the grace period).
	asked bool
	// revokeRequested: this decision cut the holder off because the FencedLease asks to
	// revoke its grant (one that never renewed is revoked at once instead).
	revokeRequested bool
	now             time.Time
}

type release struct {
	holder fencingv1.Holder
	reason string
}

// conflictRecheck is how often a FencedLease blocked by a foreign Lease looks again.
const conflictRecheck = 5 * time.Second

// decide computes the next status from what was observed. It is pure: all writes
// happen after it, starting with the status it returns.
func decide(w world) decision {
	fl := w.fl
	d := decision{status: *fl.Status.DeepCopy(), now: w.now}
	st := &d.status
	st.ObservedGeneration = fl.Generation
	if foreignLease(w.lease, fl) {
		// Not ours: adopt nothing, grant nothing, and leave the Lease alone. A deleted
		// FencedLease still revokes its holder, so deletion is never blocked.
		if st.Holder != nil && fl.DeletionTimestamp != nil {
			d.revoke(w, fencingv1.ReasonFencedLeaseDeleted, 0)
		}
		setHeldCondition(st, fl, w.lease.Name)
		setReadyCondition(st, fl)
		// The cache holds labeled Leases only, so the foreign one's deletion brings no
		// event: look again soon.
		d.requeueAfter = conflictRecheck
		return d
	}
	// The token floor: the Lease's high-water token (a re-created FencedLease continues
	// above it) and spec.minFencingToken (a restore continues above it).
	st.FencingToken = max(st.FencingToken, parseToken(leaseAnnotations(w.lease)), fl.Spec.MinFencingToken)

	if h := st.Holder; h != nil {
		switch reason := releaseReason(w, h); {
		case leaseRevokedFor(w.lease, h) && !waitingOutCutOff(w.lease, fl, h):
			// This controller cleared the Lease to revoke on expiry, and the status write
			// that records it did not land: finish that revocation.
			reason := fencingv1.ReasonLeaseExpired
			if !renewedSinceGrant(w.lease, h) {
				reason = fencingv1.ReasonStartupDeadlineExceeded
			}
			d.revoke(w, reason, 0)
		case reason != "":
			d.released = &release{holder: *h, reason: reason}
			st.Holder = nil
		case leaseRevokedFor(w.lease, h):
			// Cut off after the hand-off grace period: revoke once the lease it last renewed
			// has run out, so a holder that keeps its own deadline has stopped by then.
			switch left := w.renewal.observedAt.Add(runningLimit(w, h)).Sub(w.now); {
			case left > 0:
				d.requeueAfter = left
			case revokeRequested(fl, h):
				d.revoke(w, fencingv1.ReasonRevokeRequested, 0)
			default:
				d.revoke(w, expiryReason(renewedSinceGrant(w.lease, h) || h.FirstRenewTime != nil, true), 0)
			}
		case fl.DeletionTimestamp != nil:
			d.revoke(w, fencingv1.ReasonFencedLeaseDeleted, 0)
		case w.holder.Labels[fencingv1.LeaseLabel] != fl.Name:
			// Still there, still maybe running: not a release. Revoke it.
			d.revoke(w, fencingv1.ReasonLabelRemoved, 0)
		default:
			d.keepOrExpire(w, h)
		}
	}

	var ended types.UID
	if d.released != nil {
		ended = d.released.holder.PodUID
	}
	waiting := candidates(w.pods, st, ended)
	if st.Holder == nil && !fl.Spec.Suspend && fl.DeletionTimestamp == nil && len(waiting) > 0 &&
		st.FencingToken < math.MaxInt64 {
		i := successorIndex(waiting, fl.Status.Holder)
		next := waiting[i]
		waiting = slices.Delete(waiting, i, i+1)
		st.FencingToken++
		st.Transitions++
		st.Holder = &fencingv1.Holder{
			PodName:                next.Name,
			PodUID:                 next.UID,
			Token:                  st.FencingToken,
			AcquireTime:            *microTime(w.now),
			LastRenewTime:          microTime(w.now),
			LeaseDurationSeconds:   specDurationSeconds(fl),
			StartupDeadlineSeconds: specStartupSeconds(fl),
		}
		d.granted = st.Holder.DeepCopy()
		d.grantedPodCreated = next.CreationTimestamp.Time
		d.requeueAfter = startupDeadline(st.Holder, fl)
	}
	st.Waiting = int32(len(waiting))
	setHeldCondition(st, fl, "")
	setReadyCondition(st, fl)
	d.recordLastRenewal(w)
	return d
}

// recordLastRenewal moves status.holder.lastRenewTime to the last renewal this process saw
// happen, but only when the status is written anyway: a renewal alone never costs a status
// write (expiry is judged on the tracker, never on this field). A new leader's first look
// is not a renewal it saw happen, so it moves nothing.
func (d *decision) recordLastRenewal(w world) {
	h, was := d.status.Holder, w.fl.Status.Holder
	if h == nil || was == nil || h.PodUID != was.PodUID || h.Token != was.Token ||
		w.renewal.renewTime == nil || !w.renewal.seenRenewing {
		return
	}
	if equality.Semantic.DeepEqual(d.status, w.fl.Status) {
		return
	}
	h.LastRenewTime = microTime(w.renewal.observedAt)
}

// keepOrExpire judges a live holder by its deadline: the startup deadline until its first
// renewal, the lease duration after. It asks the holder to hand off when a newer revision
// of its workload waits, and cuts it off when it has not done so within the grace period.
func (d *decision) keepOrExpire(w world, h *fencingv1.Holder) {
	started := startedRenewing(w, h)
	if h.Handoff == nil && w.successor != nil {
		h.Handoff = &fencingv1.Handoff{
			SuccessorName:      w.successor.Name,
			SuccessorUID:       w.successor.UID,
			RequestTime:        *microTime(w.now),
			GracePeriodSeconds: specHandoffSeconds(w.fl),
		}
		d.asked = true
	}
	limit := runningLimit(w, h)
	left := w.renewal.observedAt.Add(limit).Sub(w.now)
	graceLeft := handoffGraceLeft(w, h)
	if left <= 0 {
		d.revoke(w, expiryReason(started, h.Handoff != nil && graceLeft <= 0), lateness(w, limit, -left))
		return
	}
	d.requeueAfter = left
	switch {
	case revokeRequested(w.fl, h) && !started:
		// It never renewed, so it never ran; the revocation's compare-and-swap on the
		// Lease refuses the first renewal it may be sending: revoke now.
		d.revoke(w, fencingv1.ReasonRevokeRequested, 0)
		return
	case revokeRequested(w.fl, h):
		// Cut off now; revoked once the lease it last renewed has run out (see decide).
		d.cutOff, d.revokeRequested = true, true
	}
	if started && h.FirstRenewTime == nil {
		h.FirstRenewTime = microTime(w.renewal.observedAt)
		h.LastRenewTime = microTime(w.renewal.observedAt)
	}
	if h.Handoff != nil {
		if graceLeft <= 0 {
			d.cutOff = true
		} else {
			d.requeueAfter = min(d.requeueAfter, graceLeft)
		}
	}
}

// expiryReason names a revocation decided by the clock. One that never renewed never ran,
// whatever else happened: its pod must go (see mustDelete).
func expiryReason(started, handoffTimedOut bool) fencingv1.RevocationReason {
	switch {
	case !started:
		return fencingv1.ReasonStartupDeadlineExceeded
	case handoffTimedOut:
		return fencingv1.ReasonHandoffTimeout
	}
	return fencingv1.ReasonLeaseExpired
}

// waitingOutCutOff is true while holder h stands cut off (this controller cleared the
// Lease after a hand-off grace period, or on a revoke request) and is revoked only when
// the lease it last renewed has run out.
func waitingOutCutOff(l *coordinationv1.Lease, fl *fencingv1.FencedLease, h *fencingv1.Holder) bool {
	return leaseRevokedFor(l, h) && (h.Handoff != nil || revokeRequested(fl, h))
}

// revokeRequested: the FencedLease asks to revoke exactly grant h (RevokeAnnotation).
func revokeRequested(fl *fencingv1.FencedLease, h *fencingv1.Holder) bool {
	v, ok := fl.Annotations[fencingv1.RevokeAnnotation]
	return ok && v == strconv.FormatInt(h.Token, 10)
}

// handoffGraceLeft is how long a holder asked to hand off still has to release, on this
// process's clock from when it first saw the request.
func handoffGraceLeft(w world, h *fencingv1.Holder) time.Duration {
	if h.Handoff == nil {
		return 0
	}
	since := w.handoffSince
	if since.IsZero() {
		since = w.now // asked in this decision
	}
	return since.Add(time.Duration(h.Handoff.GracePeriodSeconds) * time.Second).Sub(w.now)
}

// lateness is how long after its expiry a grant is revoked, for the metric: on this
// process's clock. A process that never saw the holder renew (it took over as leader, or
// restarted, after the last renewal) counts instead from the renewTime the holder last
// wrote on the Lease, when that is earlier: the holder's clock against this one, for the
// metric only — it decides nothing — so the metric shows the delay a failover adds (each
// new leader gives the holder a whole lease from its first look).
func lateness(w world, limit, local time.Duration) time.Duration {
	if w.renewal.seenRenewing || w.renewal.renewTime == nil {
		return local
	}
	return max(local, w.now.Sub(w.renewal.renewTime.Add(limit)))
}

// runningLimit is how long grant h lasts after its last observed renewal: the startup
// deadline until it first renewed, its lease duration from then on.
func runningLimit(w world, h *fencingv1.Holder) time.Duration {
	if startedRenewing(w, h) {
		return grantDuration(h, w.fl)
	}
	return startupDeadline(h, w.fl)
}

func startedRenewing(w world, h *fencingv1.Holder) bool {
	return h.FirstRenewTime != nil || (leaseShows(w.lease, h) && renewedSinceGrant(w.lease, h))
}

// successorIndex is where in waiting the next grant goes: to the successor a hand-off
// named when the grant that just ended was handing off, else to the oldest candidate.
func successorIndex(waiting []*corev1.Pod, ended *fencingv1.Holder) int {
	if ended == nil || ended.Handoff == nil {
		return 0
	}
	for i, p := range waiting {
		if p.UID == ended.Handoff.SuccessorUID {
			return i
		}
	}
	return 0
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
	switch pod := w.holder; {
	case pod == nil:
		return releasePodDeleted
	case finished(pod):
		return releasePodFinished
	case leaseReleasedBy(w.lease, h):
		return releaseLeaseCleared
	}
	return ""
}

// leaseReleasedBy is true when the Lease carries the holder's token and UID but no
// holder: the holder cleared holderIdentity itself. A Lease that does not yet carry the
// token is a grant the controller has not finished writing, not a release.
func leaseReleasedBy(l *coordinationv1.Lease, h *fencingv1.Holder) bool {
	return leaseCleared(l, h) && hasHolderUID(l)
}

// leaseRevokedFor is true when the Lease carries the holder's token but neither a holder
// nor a holder UID: this controller cleared it to revoke the grant on expiry. (A holder
// releasing clears holderIdentity only; the admission policy keeps the UID from it.)
func leaseRevokedFor(l *coordinationv1.Lease, h *fencingv1.Holder) bool {
	return leaseCleared(l, h) && !hasHolderUID(l)
}

func leaseCleared(l *coordinationv1.Lease, h *fencingv1.Holder) bool {
	return l != nil && parseToken(l.Annotations) == h.Token &&
		(l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "")
}

func hasHolderUID(l *coordinationv1.Lease) bool {
	_, has := leaseAnnotations(l)[fencingv1.HolderUIDAnnotation]
	return has
}

// foreignLease is true when a Lease of the FencedLease's name exists that this operator
// did not create: it lacks the lease label naming this FencedLease. The operator never
// adopts such a Lease (it may be a client-go leader election's).
func foreignLease(l *coordinationv1.Lease, fl *fencingv1.FencedLease) bool {
	return l != nil && l.Labels[fencingv1.LeaseLabel] != fl.Name
}

// renewedSinceGrant is true when the Lease's renewTime moved on from the acquireTime grant
// step 2 wrote: the holder renewed at least once. Read from the Lease, it survives a
// controller restart.
func renewedSinceGrant(l *coordinationv1.Lease, h *fencingv1.Holder) bool {
	return l != nil && l.Spec.RenewTime != nil && !l.Spec.RenewTime.Equal(&h.AcquireTime)
}

// leaseShows is true when the Lease names exactly this grant: pod, UID and token.
func leaseShows(l *coordinationv1.Lease, h *fencingv1.Holder) bool {
	return l != nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == h.PodName &&
		l.Annotations[fencingv1.HolderUIDAnnotation] == string(h.PodUID) &&
		parseToken(l.Annotations) == h.Token
}

// specDurationSeconds is the duration a grant made now gets.
func specDurationSeconds(fl *fencingv1.FencedLease) int32 {
	if s := fl.Spec.LeaseDurationSeconds; s > 0 {
		return s
	}
	return 15
}

// specStartupSeconds is the startup deadline a grant made now gets.
func specStartupSeconds(fl *fencingv1.FencedLease) int32 {
	if s := fl.Spec.StartupDeadlineSeconds; s > 0 {
		return s
	}
	return 300
}

// specHandoffSeconds is the hand-off grace period a request made now gets.
func specHandoffSeconds(fl *fencingv1.FencedLease) int32 {
	if s := fl.Spec.HandoffGracePeriodSeconds; s > 0 {
		return s
	}
	return 30
}

// startupDeadline is the startup deadline frozen into grant h.
func startupDeadline(h *fencingv1.Holder, fl *fencingv1.FencedLease) time.Duration {
	s := h.StartupDeadlineSeconds
	if s <= 0 {
		s = specStartupSeconds(fl)
	}
	return time.Duration(s) * time.Second
}

// grantDuration is the duration frozen into grant h; a grant recorded before durations
// were frozen falls back to the spec.
func grantDuration(h *fencingv1.Holder, fl *fencingv1.FencedLease) time.Duration {
	s := h.LeaseDurationSeconds
	if s <= 0 {
		s = specDurationSeconds(fl)
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
