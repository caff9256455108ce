package bench

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/fencedlease/fencedlease/pkg/holder"
)

// warmWaiters stands in for the workloads of Warm standbys, as `fencedlease hold -- CMD`
// runs in one: each waits for its grant with pkg/holder's StartWhenGranted, and its work
// begins (CMD would be exec'd) the moment that returns. It runs as its own API user and
// counts what the waiting costs the API server.
type warmWaiters struct {
	ctx context.Context
	cs  kubernetes.Interface
	// gets and watches count the requests sent: reads, and watches opened.
	gets, watches atomic.Int64

	mu      sync.Mutex
	started map[string]time.Time // "ns/pod" → when its work began
	cancel  map[string]context.CancelFunc
}

func runWarmWaiters(ctx context.Context, cfg *rest.Config) *warmWaiters {
	w := &warmWaiters{ctx: ctx, started: map[string]time.Time{}, cancel: map[string]context.CancelFunc{}}
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return waiterCounter{rt: rt, w: w} })
	w.cs = kubernetes.NewForConfigOrDie(cfg)
	return w
}

// wait starts pod ns/name's workload: it waits for the grant of lease, then holds it.
func (w *warmWaiters) wait(ns, lease, pod string, uid types.UID) {
	ctx, cancel := context.WithCancel(w.ctx)
	w.mu.Lock()
	w.cancel[ns+"/"+pod] = cancel
	w.mu.Unlock()
	go func() {
		_, err := holder.StartWhenGranted(ctx, holder.Config{Leases: holder.ClientGo(w.cs.CoordinationV1()),
			Namespace: ns, LeaseName: lease, Identity: pod, UID: uid})
		if err != nil {
			return // stopped
		}
		at := time.Now()
		w.mu.Lock()
		w.started[ns+"/"+pod] = at
		w.mu.Unlock()
	}()
}

// stop makes pod ns/name's workload stop at once, without releasing: a crash.
func (w *warmWaiters) stop(ns, pod string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if c := w.cancel[ns+"/"+pod]; c != nil {
		c()
	}
}

// startedAt is when pod ns/name's work began; zero before.
func (w *warmWaiters) startedAt(ns, pod string) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.started[ns+"/"+pod]
}

// waiterCounter counts the waiters' reads and opened watches.
type waiterCounter struct {
	rt http.RoundTripper
	w  *warmWaiters
}

func (c waiterCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet {
		if r.URL.Query().Get("watch") == "true" {
			c.w.watches.Add(1)
		} else {
			c.w.gets.Add(1)
		}
	}
	return c.rt.RoundTrip(r)
}
