package fencedlease

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// Metrics are the controller's Prometheus series, labeled by FencedLease.
type Metrics struct {
	grants      *prometheus.CounterVec
	revocations *prometheus.CounterVec
	releases    *prometheus.CounterVec
	token       *prometheus.GaugeVec
	waiting     *prometheus.GaugeVec
	grantWait   *prometheus.HistogramVec
	lateness    *prometheus.HistogramVec
}

var flLabels = []string{"namespace", "name"}

// NewMetrics creates the series and registers them with reg (none when reg is nil).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		grants: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencedlease_grants_total", Help: "Grants issued (each with a new fencing token).",
		}, flLabels),
		revocations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencedlease_revocations_total", Help: "Grants revoked, by reason.",
		}, append(flLabels, "reason")),
		releases: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencedlease_releases_total", Help: "Grants released by their holder, by reason.",
		}, append(flLabels, "reason")),
		token: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fencedlease_fencing_token", Help: "Highest fencing token issued.",
		}, flLabels),
		waiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fencedlease_waiting_pods", Help: "Candidate pods waiting for a grant.",
		}, flLabels),
		grantWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "fencedlease_grant_wait_seconds",
			Help:    "Time from a pod's creation to its grant.",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 16),
		}, flLabels),
		lateness: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "fencedlease_revocation_lateness_seconds",
			Help:    "How long after the exact expiry of a lease its revocation was decided.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
		}, flLabels),
	}
	if reg != nil {
		reg.MustRegister(m.grants, m.revocations, m.releases, m.token, m.waiting, m.grantWait, m.lateness)
	}
	return m
}

func (m *Metrics) granted(k types.NamespacedName, wait time.Duration) {
	m.grants.WithLabelValues(k.Namespace, k.Name).Inc()
	m.grantWait.WithLabelValues(k.Namespace, k.Name).Observe(wait.Seconds())
}

func (m *Metrics) revoked(k types.NamespacedName, reason string, late time.Duration) {
	m.revocations.WithLabelValues(k.Namespace, k.Name, reason).Inc()
	if reason == string(fencingv1.ReasonLeaseExpired) {
		m.lateness.WithLabelValues(k.Namespace, k.Name).Observe(late.Seconds())
	}
}

func (m *Metrics) released(k types.NamespacedName, reason string) {
	m.releases.WithLabelValues(k.Namespace, k.Name, reason).Inc()
}

func (m *Metrics) setStatus(k types.NamespacedName, st fencingv1.FencedLeaseStatus) {
	m.token.WithLabelValues(k.Namespace, k.Name).Set(float64(st.FencingToken))
	m.waiting.WithLabelValues(k.Namespace, k.Name).Set(float64(st.Waiting))
}

// forget drops the gauges of a FencedLease that is gone; counters stay until restart.
func (m *Metrics) forget(k types.NamespacedName) {
	labels := prometheus.Labels{"namespace": k.Namespace, "name": k.Name}
	m.token.DeletePartialMatch(labels)
	m.waiting.DeletePartialMatch(labels)
}
