package fencedlease

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// Series per FencedLease are gauges only, and go with it; the rest is aggregate.
func TestMetricsSeriesDoNotGrowWithFencedLeases(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	series := func() (perLease, total int) {
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			for _, s := range f.GetMetric() {
				total++
				for _, l := range s.GetLabel() {
					if l.GetName() == "name" {
						perLease++
					}
				}
			}
		}
		return perLease, total
	}
	for i := range 100 {
		k := types.NamespacedName{Namespace: "ns", Name: "fl-" + string(rune('a'+i%26)) + string(rune('a'+i/26))}
		m.granted(time.Second)
		m.revoked(string(fencingv1.ReasonLeaseExpired), time.Millisecond)
		m.released("PodFinished")
		m.setStatus(k, fencingv1.FencedLeaseStatus{FencingToken: 3, Waiting: 1})
	}
	perLease, total := series()
	// Aggregate: grants, 5 revocation and 3 release reasons, 2 histograms.
	if perLease != 300 || total != 300+11 {
		t.Fatalf("100 FencedLeases: %d per-lease series of %d; want 300 (three gauges each) of 311", perLease, total)
	}
	for i := range 100 {
		m.forget(types.NamespacedName{Namespace: "ns", Name: "fl-" + string(rune('a'+i%26)) + string(rune('a'+i/26))})
	}
	if perLease, _ := series(); perLease != 0 {
		t.Fatalf("%d series left of deleted FencedLeases", perLease)
	}
}
