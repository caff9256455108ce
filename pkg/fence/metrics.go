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

// Count counts one write to resource checked against a token: accepted, or refused as
// stale. The fences in this module call it; a fence of your own may too.
func (m *Metrics) Count(resource string, accepted bool) {
	if m == nil {
		return
	}
	accept, stale := m.writes.WithLabelValues(resource, "accepted"), m.writes.WithLabelValues(resource, "stale")
	// Both exist once a resource is seen, so increase() sees its first stale write.
	if accepted {
		accept.Inc()
	} else {
		stale.Inc()
	}
}
