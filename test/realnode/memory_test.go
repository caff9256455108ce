package realnode

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// testOperatorMemory measures the operator pods' memory (the kubelet's working set, as
// the OOM killer and kubectl top see it) with no FencedLease and with 1,000, each observed
// by the operator, then removes them. A load round that measures: make chaos runs it
// (-realnode.long); make bench measures the operator's memory up to 10,000.
func testOperatorMemory(t *testing.T) {
	if !*long {
		t.Skip("a load round that measures, run by make chaos (-realnode.long)")
	}
	const ns, n = "thousand", 1000
	newNamespace(t, ns)
	ctx := context.Background()
	before := operatorMemory(t)
	start := time.Now()
	eachOf(t, n, func(i int) error {
		return rc.Client.Create(ctx, &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("fl-%04d", i)},
			Spec: fencingv1.FencedLeaseSpec{LeaseDurationSeconds: 15}})
	})
	observed := 0
	if err := poll(3*time.Minute, func() bool {
		list := &fencingv1.FencedLeaseList{}
		if rc.Client.List(ctx, list, clientNamespace(ns)) != nil {
			return false
		}
		observed = 0
		for _, fl := range list.Items {
			if fl.Status.ObservedGeneration == fl.Generation {
				observed++
			}
		}
		return observed == n
	}); err != nil {
		t.Fatalf("the operator observed %d of %d FencedLeases in 3 minutes", observed, n)
	}
	settled := time.Since(start)
	time.Sleep(5 * time.Second) // let the heap settle past the burst
	after := operatorMemory(t)
	measured("operator pods' working set, no FencedLease", "%s", before)
	measured(fmt.Sprintf("operator pods' working set, %d FencedLeases", n), "%s (all observed %v after the first create)", after, settled.Round(100*time.Millisecond))
	// One by one, as they were created: a delete-collection of a thousand objects can
	// outlast the API server's request timeout on a loaded machine.
	eachOf(t, n, func(i int) error {
		return rc.Client.Delete(ctx, &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("fl-%04d", i)}})
	})
	if err := poll(3*time.Minute, func() bool {
		list := &fencingv1.FencedLeaseList{}
		return rc.Client.List(ctx, list, clientNamespace(ns)) == nil && len(list.Items) == 0
	}); err != nil {
		t.Fatalf("the %d FencedLeases were not gone 3 minutes after their deletion", n)
	}
}

// operatorMemory is each operator pod's working set from its node's kubelet
// (/stats/summary through the API server), leader marked.
func operatorMemory(t *testing.T) string {
	t.Helper()
	var parts []string
	for _, node := range rc.Nodes {
		raw, err := clientset(t).CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", node, "proxy/stats/summary").DoRaw(context.Background())
		must(t, err)
		var summary struct {
			Pods []struct {
				PodRef     struct{ Name, Namespace string } `json:"podRef"`
				Containers []struct {
					Name   string `json:"name"`
					Memory struct {
						WorkingSetBytes uint64 `json:"workingSetBytes"`
					} `json:"memory"`
				} `json:"containers"`
			} `json:"pods"`
		}
		must(t, json.Unmarshal(raw, &summary))
		for _, p := range summary.Pods {
			if p.PodRef.Namespace != operatorNamespace {
				continue
			}
			for _, c := range p.Containers {
				if c.Name == "manager" {
					parts = append(parts, fmt.Sprintf("%.1f MiB%s", float64(c.Memory.WorkingSetBytes)/(1<<20), leaderMark(t, p.PodRef.Name)))
				}
			}
		}
	}
	return strings.Join(parts, ", ")
}

func leaderMark(t *testing.T, pod string) string {
	l, err := clientset(t).CoordinationV1().Leases(operatorNamespace).Get(context.Background(), "fencedlease-operator", metav1.GetOptions{})
	if err == nil && l.Spec.HolderIdentity != nil && strings.HasPrefix(*l.Spec.HolderIdentity, pod) {
		return " (leader)"
	}
	return ""
}

// eachOf calls f for 0 to n-1 from eight workers, and fails t on the first error.
func eachOf(t *testing.T, n int, f func(i int) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				errs <- f(i)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		must(t, err)
	}
}
