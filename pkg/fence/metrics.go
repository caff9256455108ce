package fence

import "github.com/prometheus/client_golang/prometheus"

// Metrics counts fenced writes per resource.
type Metrics struct {
	writes *prometheus.CounterVec
}

// NewMetrics creates the series and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{writes: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fencedlease_fence_writes_total",
		Help: "Writes checked against a fencing token, by resource and result (accepted or stale).",
	}, []string{"resource", "result"})}
	reg.MustRegister(m.writes)
	return m
}

func (m *Metrics) count(resource string, accepted bool) {
	if m == nil {
		return
	}
	result := "stale"
	if accepted {
		result = "accepted"
	}
	m.writes.WithLabelValues(resource, result).Inc()
}
