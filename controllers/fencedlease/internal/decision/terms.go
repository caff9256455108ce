package decision

import (
	"strconv"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/internal/grantorder"
	"github.com/fencedlease/fencedlease/pkg/leaserecord"
)

// WaitingOutCutOff is true while holder h stands cut off on purpose (C1: after a
// hand-off grace period, on a revoke request, or because its pod cannot run) and is
// revoked only when the lease it last renewed has run out.
func WaitingOutCutOff(rec leaserecord.Record, fl *fencingv1.FencedLease, h *fencingv1.Holder) bool {
	return rec.CutOff(h.Token) && (h.Handoff != nil || revokeRequestedFor(fl, h) || cutOffFor(rec, fencingv1.ReasonPodCannotRun))
}

// cutOffFor: the Lease records that the operator cut its holder off for reason.
func cutOffFor(rec leaserecord.Record, reason fencingv1.RevocationReason) bool {
	return rec.CutOffReason == string(reason)
}

// revokeRequested: the FencedLease asks to revoke exactly grant h (RevokeAnnotation; Q1).
func revokeRequestedFor(fl *fencingv1.FencedLease, h *fencingv1.Holder) bool {
	v, ok := fl.Annotations[fencingv1.RevokeAnnotation]
	return ok && v == strconv.FormatInt(h.Token, 10)
}

// handoffGraceLeft is how long a holder asked to hand off still has to release, on this
// process's clock from when it first saw the request.
func handoffGraceLeft(w World, h *fencingv1.Holder) time.Duration {
	if h.Handoff == nil {
		return 0
	}
	since := w.HandoffSince
	if since.IsZero() {
		since = w.Now // asked in this decision
	}
	return since.Add(time.Duration(h.Handoff.GracePeriodSeconds) * time.Second).Sub(w.Now)
}

// lateBy is how long after its expiry a grant is revoked, for the metric: on this
// process's clock. A process that never saw the holder renew (it took over as leader, or
// restarted, after the last renewal) counts instead from the RenewTime the holder last
// wrote on the Lease, when that is earlier: the holder's clock against this one, for the
// metric only — it decides nothing — so the metric shows the delay a failover adds (each
// new leader gives the holder a whole lease from its first look).
func lateBy(w World, limit, local time.Duration) time.Duration {
	if w.Held.SeenRenewing || w.Held.RenewTime == nil {
		return local
	}
	return max(local, w.Now.Sub(w.Held.RenewTime.Add(limit)))
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

// StartupSecondsFor is the startup deadline a grant to pod p freezes: the spec's, or —
// p a Warm standby already running, whose process waits on the Lease and confirms the
// grant at once — a confirmation bound on the scale of the lease when that is shorter:
// two lease durations, at least WarmConfirmFloor. A standby that cannot confirm (its node
// cut off before the node controller says so) then costs that, not a cold start's
// deadline.
func StartupSecondsFor(fl *fencingv1.FencedLease, p *corev1.Pod) int32 {
	s := specStartupSeconds(fl)
	if p != nil && grantorder.Warm(p) && p.Status.Phase == corev1.PodRunning {
		s = min(s, max(2*specDurationSeconds(fl), WarmConfirmFloor))
	}
	return s
}

// WarmConfirmFloor is the shortest confirmation bound of a running Warm standby, in
// seconds: room for a renewal's round trip on a loaded API server with a short lease.
const WarmConfirmFloor = 10

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

// GrantDuration is the duration frozen into grant h; a grant recorded before durations
// were frozen falls back to the spec.
func GrantDuration(h *fencingv1.Holder, fl *fencingv1.FencedLease) time.Duration {
	s := h.LeaseDurationSeconds
	if s <= 0 {
		s = specDurationSeconds(fl)
	}
	return time.Duration(s) * time.Second
}

// MicroTime drops the monotonic reading and what the API would not store, so a status
// decided twice from the same observation compares equal.
func MicroTime(t time.Time) *metav1.MicroTime {
	m := metav1.NewMicroTime(t.Round(0).Truncate(time.Microsecond))
	return &m
}

// revocationDelay is the lock-delay a revocation for reason made now gets: the spec's,
// for an involuntary one — the holder may still be acting — and none for a pod that never
// started, or a FencedLease going away.
func revocationDelay(fl *fencingv1.FencedLease, reason fencingv1.RevocationReason) int32 {
	switch reason {
	case fencingv1.ReasonPodCannotStart, fencingv1.ReasonFencedLeaseDeleted:
		return 0
	}
	return fl.Spec.RevocationDelaySeconds
}

// revocationDelayLeft is what remains of the lock-delay of the last revocation in st (X8):
// from when this process revoked, or — a process that took over since — from its first
// look, on its own clock; decidedNow is a revocation this very decision made.
func revocationDelayLeft(w World, st *fencingv1.FencedLeaseStatus, decidedNow *fencingv1.Revocation) time.Duration {
	rv := st.LastRevocation
	if rv == nil || rv.DelaySeconds <= 0 {
		return 0
	}
	since := w.DelaySince
	if decidedNow != nil || since.IsZero() {
		since = w.Now
	}
	return since.Add(time.Duration(rv.DelaySeconds) * time.Second).Sub(w.Now)
}

// truncate cuts s to at most n bytes, on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// ConflictRecheck is how often a FencedLease blocked by a foreign Lease looks again.
const ConflictRecheck = 5 * time.Second
