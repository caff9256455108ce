package leadership

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// fakeLock is a lock whose writes take `latency` on the fake clock and fail with `err`.
type fakeLock struct {
	resourcelock.Interface
	clock   *clocktesting.FakeClock
	latency time.Duration
	err     error
}

func (l *fakeLock) Identity() string { return "me" }
func (l *fakeLock) Create(context.Context, resourcelock.LeaderElectionRecord) error {
	l.clock.Step(l.latency)
	return l.err
}
func (l *fakeLock) Update(context.Context, resourcelock.LeaderElectionRecord) error {
	l.clock.Step(l.latency)
	return l.err
}

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func TestLeadershipLastsTheRenewDeadlineFromWhenTheRenewalWasSent(t *testing.T) {
	c := clocktesting.NewFakeClock(t0)
	g := NewGuard(c, 7*time.Second, nil)
	l := &fakeLock{clock: c, latency: 2 * time.Second}
	lock := g.Lock(l)
	if g.Err() == nil {
		t.Fatal("leading before any acquisition")
	}
	if err := lock.Create(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: "me"}); err != nil {
		t.Fatal(err)
	}
	// Sent at t0, confirmed at t0+2s: valid until t0+7s, not t0+9s.
	c.SetTime(t0.Add(7*time.Second - time.Millisecond))
	if g.Err() != nil {
		t.Fatal("not leading 1ms before the deadline")
	}
	c.SetTime(t0.Add(7 * time.Second))
	if !errors.Is(g.Err(), ErrNotLeader) {
		t.Fatal("still leading at the renew deadline counted from the send")
	}
}

func TestAFailedRenewalConfirmsNothingAndAReleaseEndsLeadership(t *testing.T) {
	c := clocktesting.NewFakeClock(t0)
	g := NewGuard(c, 7*time.Second, nil)
	l := &fakeLock{clock: c}
	lock := g.Lock(l)
	_ = lock.Update(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: "me"})
	c.Step(5 * time.Second)
	l.err = errors.New("timeout") // the server may or may not have taken it
	_ = lock.Update(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: "me"})
	c.Step(2 * time.Second)
	if g.Err() == nil {
		t.Fatal("a failed renewal extended leadership")
	}
	l.err = nil
	_ = lock.Update(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: "me"})
	if g.Err() != nil {
		t.Fatal("a confirmed renewal did not restore leadership")
	}
	_ = lock.Update(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: ""}) // released
	if g.Err() == nil {
		t.Fatal("still leading after releasing")
	}
}

func TestWritesAreRefusedAndCountedWhileNotLeading(t *testing.T) {
	c := clocktesting.NewFakeClock(t0)
	reg := prometheus.NewRegistry()
	g := NewGuard(c, 7*time.Second, reg)
	cl := g.Client(fake.NewClientBuilder().Build())
	ctx := context.Background()
	cm := &corev1.ConfigMap{}
	cm.Namespace, cm.Name = "ns", "x"
	if err := cl.Create(ctx, cm); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("create while not leading: %v", err)
	}
	if err := cl.Status().Update(ctx, cm); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("status update while not leading: %v", err)
	}
	if err := cl.Delete(ctx, cm); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("delete while not leading: %v", err)
	}
	if n := testutil.ToFloat64(g.refused); n != 3 {
		t.Fatalf("refused = %v, want 3", n)
	}
	_ = g.Lock(&fakeLock{clock: c}).Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "me"})
	if err := cl.Create(ctx, cm); err != nil {
		t.Fatalf("create while leading: %v", err)
	}
	if err := cl.Get(ctx, client.ObjectKeyFromObject(cm), cm); err != nil {
		t.Fatal(err)
	}
}
