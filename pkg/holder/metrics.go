package holder

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are a holder's Prometheus series.
type Metrics struct {
	renewals *prometheus.CounterVec
	lost     *prometheus.CounterVec
}

// NewMetrics creates the series and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		renewals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencedlease_holder_renewals_total", Help: "Lease renewal attempts, by result (ok or error).",
		}, []string{"result"}),
		lost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencedlease_holder_grants_ended_total", Help: "Grants that ended, by reason (revoked, deadline, released, stopped).",
		}, []string{"reason"}),
	}
	reg.MustRegister(m.renewals, m.lost)
	return m
}

func (m *Metrics) renewed(err error) {
	if m == nil {
		return
	}
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.renewals.WithLabelValues(result).Inc()
}

func (m *Metrics) lostFor(reason error) {
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
	m.lost.WithLabelValues(label).Inc()
}
