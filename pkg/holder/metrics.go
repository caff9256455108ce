package holder

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are a holder's Prometheus series, labeled with the FencedLease's namespace and
// name (as the operator's own series are), so one process holding several grants, or many
// holders scraped together, stay apart.
type Metrics struct {
	renewals *prometheus.CounterVec
	lost     *prometheus.CounterVec
}

// NewMetrics creates the series and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		renewals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencedlease_holder_renewals_total", Help: "Lease renewal attempts, by result (ok or error).",
		}, []string{"namespace", "name", "result"}),
		lost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencedlease_holder_grants_ended_total", Help: "Grants that ended, by reason (revoked, deadline, released, stopped).",
		}, []string{"namespace", "name", "reason"}),
	}
	reg.MustRegister(m.renewals, m.lost)
	return m
}

// start makes this grant's series exist at 0, so increase() and rate() see the first
// failed renewal and the first loss.
func (m *Metrics) start(c *Config) {
	if m == nil {
		return
	}
	for _, result := range []string{"ok", "error"} {
		m.renewals.WithLabelValues(c.Namespace, c.LeaseName, result)
	}
	for _, reason := range []string{"revoked", "deadline", "released", "stopped"} {
		m.lost.WithLabelValues(c.Namespace, c.LeaseName, reason)
	}
}

func (m *Metrics) renewed(c *Config, err error) {
	if m == nil {
		return
	}
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.renewals.WithLabelValues(c.Namespace, c.LeaseName, result).Inc()
}

func (m *Metrics) lostFor(c *Config, reason error) {
	if m == nil {
		return
	}
	label := "stopped"
	switch {
	case errors.Is(reason, ErrRevoked):
		label = "revoked"
	case errors.Is(reason, ErrDeadline):
		label = "deadline"
	case errors.Is(reason, ErrReleased):
		label = "released"
	}
	m.lost.WithLabelValues(c.Namespace, c.LeaseName, label).Inc()
}
