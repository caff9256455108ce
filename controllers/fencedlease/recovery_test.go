package fencedlease

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/controllers/leadership"
)

func TestUnreachable(t *testing.T) {
	gr := schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}
	refused := &url.Error{Op: "Get", URL: "https://127.0.0.1:6443", Err: &net.OpError{Op: "dial", Err: errors.New("connection refused")}}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{fmt.Errorf("writing status: %w", refused), true},
		{context.DeadlineExceeded, true},
		{apierrors.NewServiceUnavailable("etcd"), true},
		{apierrors.NewTimeoutError("slow", 1), true},
		{apierrors.NewConflict(gr, "x", errors.New("stale")), false},
		{apierrors.NewNotFound(gr, "x"), false},
		{leadership.ErrNotLeader, false},
	} {
		if got := unreachable(tc.err); got != tc.want {
			t.Errorf("unreachable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// flakyReader fails every read until up is set.
type flakyReader struct {
	client.Reader
	up   atomic.Bool
	slow atomic.Bool // answers nothing until the caller gives up, as an overloaded server
}

func (f *flakyReader) List(ctx context.Context, l client.ObjectList, opts ...client.ListOption) error {
	if f.slow.Load() {
		<-ctx.Done()
		return &url.Error{Op: "Get", URL: "https://127.0.0.1:6443", Err: ctx.Err()}
	}
	if !f.up.Load() {
		return &url.Error{Op: "Get", URL: "https://127.0.0.1:6443", Err: &net.OpError{Op: "dial", Err: errors.New("connection refused")}}
	}
	return f.Reader.List(ctx, l, opts...)
}

func TestEveryFencedLeaseIsQueuedWhenTheServerIsBack(t *testing.T) {
	rc, server := runningRecovery(t, 0, "a", "b", "c")

	time.Sleep(50 * time.Millisecond)
	if len(rc.events) != 0 {
		t.Fatal("queued without an outage")
	}
	rc.observe(fmt.Errorf("reading: %w", &net.OpError{Op: "dial", Err: errors.New("refused")}))
	time.Sleep(50 * time.Millisecond)
	if len(rc.events) != 0 {
		t.Fatal("queued while the server is still down")
	}
	server.up.Store(true)
	got := map[string]bool{}
	for len(got) < 3 {
		select {
		case e := <-rc.events:
			got[e.Object.GetName()] = true
		case <-time.After(2 * time.Second):
			t.Fatalf("queued only %v after the server came back", got)
		}
	}
	if rc.outage.Load() {
		t.Fatal("the outage is still marked")
	}
}

// A reconcile that timed out against a slow server marks an outage, but a probe that
// answers at once shows the server is up: nothing is queued on top of the retries already
// due (at 10,000 FencedLeases that herd kept the queue full).
func TestASlowServerIsNotAnOutage(t *testing.T) {
	rc, server := runningRecovery(t, 0, "a")
	server.up.Store(true)

	rc.observe(fmt.Errorf("reading: %w", context.DeadlineExceeded))
	time.Sleep(100 * time.Millisecond)
	if len(rc.events) != 0 {
		t.Fatal("queued every FencedLease although the server answered the probe at once")
	}
	if rc.outage.Load() {
		t.Fatal("the outage is still marked")
	}
}

// An overloaded server that does not answer the probe in time is slow, not gone: when it
// answers again, nothing is queued on top of the retries already due.
func TestAProbeThatTimesOutIsNotAnOutage(t *testing.T) {
	rc, server := runningRecovery(t, 20*time.Millisecond, "a")
	server.slow.Store(true) // before up: the very first probes time out
	server.up.Store(true)

	rc.observe(fmt.Errorf("reading: %w", context.DeadlineExceeded))
	time.Sleep(150 * time.Millisecond) // several probes time out
	server.slow.Store(false)
	time.Sleep(100 * time.Millisecond)
	if len(rc.events) != 0 {
		t.Fatal("queued every FencedLease after probes that only timed out")
	}
	if rc.outage.Load() {
		t.Fatal("the outage is still marked")
	}
}

// runningRecovery starts a recovery probing every 10 ms (with probeTimeout, or the default
// when 0) against a server in front of a fake client holding FencedLeases of these names in
// namespace ns; it stops with t.
func runningRecovery(t *testing.T, probeTimeout time.Duration, names ...string) (*recovery, *flakyReader) {
	s := runtime.NewScheme()
	_ = fencingv1.AddToScheme(s)
	var objs []client.Object
	for _, n := range names {
		objs = append(objs, &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: n}})
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()
	server := &flakyReader{Reader: c}
	rc := newRecovery(server, c)
	rc.interval = 10 * time.Millisecond
	if probeTimeout > 0 {
		rc.probeTimeout = probeTimeout
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = rc.Start(ctx) }()
	return rc, server
}
