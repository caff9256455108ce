package bench

import (
	"fmt"
	"net/http"
	"net/http/httptrace"
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
	// trips keeps each write's start and times, by namespace.
	trips map[string][]trip
}

// trip is one Lease write: when it was sent, how long it waited on this side for a
// connection (a new one dialed when every open one carries its 100 streams), and its
// whole round trip.
type trip struct {
	at          time.Time
	connWait, d time.Duration
}

var renewalRoundTrips = &leaseWriteTimes{trips: map[string][]trip{}}

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
	var s sample
	for _, t := range w.trips[ns] {
		s = append(s, t.d)
	}
	delete(w.trips, ns)
	return s
}

// timeline returns ns's round trips sent in each window of width step from start to end,
// one line per window: the writes sent, their round trip p50/p99/max, and of it the p99
// and max of the wait for a connection, then what also(window) says; and forgets them.
func (w *leaseWriteTimes) timeline(ns string, start, end time.Time, step time.Duration, also func(from, to time.Time) string) []string {
	w.mu.Lock()
	trips := w.trips[ns]
	delete(w.trips, ns)
	w.mu.Unlock()
	var out []string
	for from := start; from.Before(end); from = from.Add(step) {
		var d, wait sample
		for _, t := range trips {
			if !t.at.Before(from) && t.at.Before(from.Add(step)) {
				d, wait = append(d, t.d), append(wait, t.connWait)
			}
		}
		out = append(out, fmt.Sprintf("+%v: %d sent, round trip %v / %v / max %v; waiting for a connection p99 %v, max %v; %s",
			from.Sub(start).Round(time.Second), len(d), d.quantile(0.5).Round(time.Millisecond),
			d.quantile(0.99).Round(time.Millisecond), d.quantile(1).Round(time.Millisecond),
			wait.quantile(0.99).Round(time.Millisecond), wait.quantile(1).Round(time.Millisecond), also(from, from.Add(step))))
	}
	return out
}

type leaseWriteTimer struct {
	rt http.RoundTripper
	w  *leaseWriteTimes
}

func (t leaseWriteTimer) RoundTrip(r *http.Request) (*http.Response, error) {
	// /apis/coordination.k8s.io/v1/namespaces/<ns>/leases/<name>
	parts := strings.Split(r.URL.Path, "/")
	if !(r.Method == http.MethodPut || r.Method == http.MethodPatch) || len(parts) != 8 || parts[6] != "leases" {
		return t.rt.RoundTrip(r)
	}
	start := time.Now()
	var gotConn time.Time
	var once sync.Once
	trace := &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { once.Do(func() { gotConn = time.Now() }) }}
	resp, err := t.rt.RoundTrip(r.WithContext(httptrace.WithClientTrace(r.Context(), trace)))
	d := time.Since(start)
	var wait time.Duration
	once.Do(func() {}) // a GotConn after this is too late to count
	if !gotConn.IsZero() {
		wait = gotConn.Sub(start)
	}
	t.w.mu.Lock()
	t.w.trips[parts[5]] = append(t.w.trips[parts[5]], trip{at: start, connWait: wait, d: d})
	t.w.mu.Unlock()
	return resp, err
}
