package fencedlease

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// Metrics are the controller's Prometheus series. Only gauges carry a FencedLease's
// namespace and name (and are dropped with it); counters and histograms are aggregate, so
// the series grow by two per FencedLease, three while one is not Ready.
type Metrics struct {
	grants      prometheus.Counter
	revocations *prometheus.CounterVec
	releases    *prometheus.CounterVec
	token       *prometheus.GaugeVec
	waiting     *prometheus.GaugeVec
	notReady    *prometheus.GaugeVec
	slots       *prometheus.GaugeVec
	slotsHeld   *prometheus.GaugeVec
	grantWait   prometheus.Histogram
	lateness    prometheus.Histogram
}

var flLabels = []string{"namespace", "name"}

// NewMetrics creates the series and registers them with reg (none when reg is nil).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		grants: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fencedlease_grants_total", Help: "Grants issued (each with a new fencing token), all FencedLeases.",
		}),
		revocations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencedlease_revocations_total", Help: "Grants revoked, by reason, all FencedLeases.",
		}, []string{"reason"}),
		releases: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencedlease_releases_total", Help: "Grants released by their holder, by reason, all FencedLeases.",
		}, []string{"reason"}),
		token: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fencedlease_fencing_token", Help: "Highest fencing token issued.",
		}, flLabels),
		waiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fencedlease_waiting_pods", Help: "Candidate pods waiting for a grant.",
		}, flLabels),
		notReady: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fencedlease_not_ready",
			Help: "1, with the reason, while the Ready condition is False; no series while it is True (held by a pod that renewed, idle, or suspended as asked).",
		}, append(flLabels, "reason")),
		slots: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fencedlease_slots", Help: "spec.holders of a FencedLease with slots; no series for one without.",
		}, flLabels),
		slotsHeld: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fencedlease_slots_held", Help: "Slots a pod holds, of a FencedLease with slots (removed slots still draining count); no series for one without.",
		}, flLabels),
		grantWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "fencedlease_grant_wait_seconds",
			Help:    "Time from a pod's creation to its grant, all FencedLeases.",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 16),
		}),
		lateness: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "fencedlease_revocation_lateness_seconds",
			Help:    "How long after the exact expiry of a lease its revocation was decided (counted from the last renewal any leader recorded, so it includes what failovers cost), all FencedLeases.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 18),
		}),
	}
	// Every reason exists from the start at 0, so increase() and rate() see the first one.
	for _, reason := range []fencingv1.RevocationReason{fencingv1.ReasonLeaseExpired, fencingv1.ReasonStartupDeadlineExceeded,
		fencingv1.ReasonFencedLeaseDeleted, fencingv1.ReasonLabelRemoved, fencingv1.ReasonHandoffTimeout, fencingv1.ReasonRevokeRequested,
		fencingv1.ReasonPodCannotStart, fencingv1.ReasonPodCannotRun} {
		m.revocations.WithLabelValues(string(reason))
	}
	for _, reason := range []fencingv1.ReleaseReason{fencingv1.ReleasePodFinished, fencingv1.ReleasePodDeleted, fencingv1.ReleaseLeaseReleased} {
		m.releases.WithLabelValues(string(reason))
	}
	if reg != nil {
		reg.MustRegister(m.grants, m.revocations, m.releases, m.token, m.waiting, m.notReady, m.slots, m.slotsHeld, m.grantWait, m.lateness)
	}
	return m
}

func (m *Metrics) countGrant(wait time.Duration) {
	m.grants.Inc()
	m.grantWait.Observe(wait.Seconds())
}

func (m *Metrics) countRevocation(reason fencingv1.RevocationReason, late time.Duration) {
	m.revocations.WithLabelValues(string(reason)).Inc()
	if reason == fencingv1.ReasonLeaseExpired {
		m.lateness.Observe(late.Seconds())
	}
}

func (m *Metrics) countRelease(reason fencingv1.ReleaseReason) {
	m.releases.WithLabelValues(string(reason)).Inc()
}

func (m *Metrics) setStatus(k types.NamespacedName, st fencingv1.FencedLeaseStatus) {
	m.token.WithLabelValues(k.Namespace, k.Name).Set(float64(st.FencingToken))
	m.waiting.WithLabelValues(k.Namespace, k.Name).Set(float64(st.Waiting))
	// Sparse: a FencedLease that works costs no series here, so /metrics stays small at
	// 10,000; one that does not is there with its reason.
	m.notReady.DeletePartialMatch(prometheus.Labels{"namespace": k.Namespace, "name": k.Name})
	if c := meta.FindStatusCondition(st.Conditions, fencingv1.ConditionReady); c != nil && c.Status != metav1.ConditionTrue {
		m.notReady.WithLabelValues(k.Namespace, k.Name, c.Reason).Set(1)
	}
	// Per FencedLease, never per slot: two series however many slots it has.
	var held, n int
	if _, err := fmt.Sscanf(st.Holding, "%d/%d", &held, &n); err == nil {
		m.slots.WithLabelValues(k.Namespace, k.Name).Set(float64(n))
		m.slotsHeld.WithLabelValues(k.Namespace, k.Name).Set(float64(held))
	}
}

// forget drops the series of a FencedLease that is gone.
func (m *Metrics) forget(k types.NamespacedName) {
	labels := prometheus.Labels{"namespace": k.Namespace, "name": k.Name}
	m.token.DeletePartialMatch(labels)
	m.waiting.DeletePartialMatch(labels)
	m.notReady.DeletePartialMatch(labels)
	m.slots.DeletePartialMatch(labels)
	m.slotsHeld.DeletePartialMatch(labels)
}
