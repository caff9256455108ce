package bench

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// Each Lease write is timed once, in its namespace's window by when it was sent; other
// requests are not timed.
func TestLeaseWriteTimelinePutsEachWriteInItsWindow(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/slow") {
			time.Sleep(50 * time.Millisecond)
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	w := &leaseWriteTimes{trips: map[string][]trip{}}
	hc, err := rest.HTTPClientFor(w.timed(&rest.Config{Host: srv.URL}))
	if err != nil {
		t.Fatal(err)
	}
	send := func(method, path string) {
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
	}
	start := time.Now()
	send(http.MethodPut, "/apis/coordination.k8s.io/v1/namespaces/a/leases/slow")
	send(http.MethodPatch, "/apis/coordination.k8s.io/v1/namespaces/a/leases/fast")
	send(http.MethodGet, "/apis/coordination.k8s.io/v1/namespaces/a/leases/fast")
	send(http.MethodPut, "/apis/coordination.k8s.io/v1/namespaces/b/leases/x")
	end := time.Now()

	lines := w.timeline("a", start, end, time.Hour, func(from, to time.Time) string { return "also" })
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "+0s: 2 sent, round trip ") || !strings.HasSuffix(lines[0], "; also") {
		t.Fatalf("timeline(a) = %q, want one window of the two writes", lines)
	}
	if max := lines[0][strings.Index(lines[0], "max ")+4:]; strings.HasPrefix(max, "0s") {
		t.Errorf("timeline(a) = %q: the slow write's 50 ms is missing", lines[0])
	}
	if again := w.timeline("a", start, end, time.Hour, func(from, to time.Time) string { return "" }); !strings.HasPrefix(again[0], "+0s: 0 sent") {
		t.Errorf("a second timeline(a) = %q, want the writes forgotten", again)
	}
	if got := len(w.take("b")); got != 1 {
		t.Errorf("take(b) = %d writes, want 1", got)
	}
}
