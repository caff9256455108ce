package testenv

import "github.com/prometheus/client_golang/prometheus"

// FenceWrites is fencedlease_fence_writes_total{resource, result} in reg ("accepted" or
// "stale"); -1 when there is no such series.
func FenceWrites(reg prometheus.Gatherer, resource, result string) float64 {
	families, _ := reg.Gather()
	for _, f := range families {
		if f.GetName() != "fencedlease_fence_writes_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := Labels(m)
			if labels["resource"] == resource && labels["result"] == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	return -1
}
