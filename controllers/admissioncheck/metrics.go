package admissioncheck

import "github.com/prometheus/client_golang/prometheus"

// Metrics is the gauge fencedlease_admission_policy_ready.
type Metrics struct {
	ready *prometheus.GaugeVec
}

// NewMetrics creates the gauge and registers it with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{ready: prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fencedlease_admission_policy_ready",
		Help: "1 when the admission policy is installed, bound and names this operator in its parameter; 0 when not (see the operator's log and events).",
	}, []string{"policy"})}
	reg.MustRegister(m.ready)
	return m
}

func (m *Metrics) set(policy string, ready bool) {
	if m == nil {
		return
	}
	v := 0.0
	if ready {
		v = 1
	}
	m.ready.WithLabelValues(policy).Set(v)
}

// Gauge is the series of policy, for tests and debugging.
func (m *Metrics) Gauge(policy string) prometheus.Gauge { return m.ready.WithLabelValues(policy) }
