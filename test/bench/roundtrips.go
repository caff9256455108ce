package bench

import (
	"net/http"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
)

// leaseWriteTimes times the Lease writes (renewals) a client sends, by namespace: the round
// trip a holder or a client-go leader waits for, which decides whether its renew deadline
// holds on a loaded server.
type leaseWriteTimes struct {
	mu sync.Mutex
	by map[string]sample
}

var renewalRoundTrips = &leaseWriteTimes{by: map[string]sample{}}

// timed returns cfg with its Lease writes timed.
func (w *leaseWriteTimes) timed(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return leaseWriteTimer{rt: rt, w: w} })
	return cfg
}

// take returns the round trips timed in ns since the last take, and forgets them.
func (w *leaseWriteTimes) take(ns string) sample {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.by[ns]
	delete(w.by, ns)
	return s
}

type leaseWriteTimer struct {
	rt http.RoundTripper
	w  *leaseWriteTimes
}

func (t leaseWriteTimer) RoundTrip(r *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := t.rt.RoundTrip(r)
	// /apis/coordination.k8s.io/v1/namespaces/<ns>/leases/<name>
	parts := strings.Split(r.URL.Path, "/")
	if (r.Method == http.MethodPut || r.Method == http.MethodPatch) && len(parts) == 8 && parts[6] == "leases" {
		t.w.mu.Lock()
		t.w.by[parts[5]] = append(t.w.by[parts[5]], time.Since(start))
		t.w.mu.Unlock()
	}
	return resp, err
}
