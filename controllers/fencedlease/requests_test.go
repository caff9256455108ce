package fencedlease_test

import (
	"fmt"
	"net/http"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// requestCounter counts a manager's requests to the API server by method and path,
// watches left out (they are set up once, not per renewal).
type requestCounter struct {
	rt http.RoundTripper

	mu       sync.Mutex
	counting bool
	seen     map[string]int
}

func (c *requestCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Query().Get("watch") != "true" {
		c.mu.Lock()
		if c.counting {
			c.seen[r.Method+" "+r.URL.Path]++
		}
		c.mu.Unlock()
	}
	return c.rt.RoundTrip(r)
}

func (c *requestCounter) start() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counting, c.seen = true, map[string]int{}
}

func (c *requestCounter) stop() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counting = false
	return c.seen
}

var _ = Describe("Requests per renewal (issue 10)", func() {
	It("reads no Lease and writes status at most every half lease while a holder renews", func() {
		ns := newNamespace()
		counter := &requestCounter{}
		startController(ns, controllerOpts{id: "counted", wrap: func(rt http.RoundTripper) http.RoundTripper {
			counter.rt = rt
			return counter
		}})
		createFL(ns, "invoices", 2, fencingv1.DeletePodPolicy)
		createPod(ns, "a", "invoices")
		expectHolder(ns, "invoices", "a", 1)
		renew(ns, "invoices") // started: from here on only renewals happen

		const window, interval = 4 * time.Second, 100 * time.Millisecond
		Eventually(func() bool { return getFL(ns, "invoices").Status.Holder.FirstRenewTime != nil }).
			WithTimeout(10*time.Second).WithPolling(20*time.Millisecond).Should(BeTrue(), "the first renewal recorded")
		counter.start()
		stopRenewing := keepRenewing(ns, "invoices", interval)
		time.Sleep(window)
		stopRenewing()
		seen := counter.stop()

		renewals := int(window / interval)
		total := 0
		for _, n := range seen {
			total += n
		}
		GinkgoWriter.Printf("%d renewals: operator requests %v (%.3f per renewal)\n", renewals, seen, float64(total)/float64(renewals))
		lease := fmt.Sprintf("/apis/coordination.k8s.io/v1/namespaces/%s/leases/invoices", ns)
		status := fmt.Sprintf("/apis/fencing.fencedlease.io/v1alpha1/namespaces/%s/fencedleases/invoices/status", ns)
		Expect(seen).NotTo(HaveKey("GET "+lease), "the Lease is followed from the cache")
		Expect(seen["PUT "+status]).To(BeNumerically("<=", int(window/time.Second)+1), "lastRenewTime at most every half lease (1 s)")
		for k := range seen {
			Expect(k).To(Equal("PUT "+status), "no other request while only renewals happen")
		}
		Expect(getFL(ns, "invoices").Status.Holder.PodName).To(Equal("a"))
	})
})
