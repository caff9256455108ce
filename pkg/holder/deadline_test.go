package holder

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// memLease is one Lease in memory: Update succeeds until cut; block makes Get wait for
// its context instead (an API server that does not answer).
type memLease struct {
	mu    sync.Mutex
	l     *coordinationv1.Lease
	cut   bool
	block bool
}

func (m *memLease) Leases(string) LeaseClient { return m }

func (m *memLease) Get(ctx context.Context, _ string, _ metav1.GetOptions) (*coordinationv1.Lease, error) {
	m.mu.Lock()
	block := m.block
	l := m.l.DeepCopy()
	m.mu.Unlock()
	if block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return l, nil
}

func (m *memLease) Update(_ context.Context, l *coordinationv1.Lease, _ metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cut {
		return nil, errors.New("partitioned")
	}
	m.l = l.DeepCopy()
	return l.DeepCopy(), nil
}

func (m *memLease) Watch(context.Context, metav1.ListOptions) (watch.Interface, error) {
	return nil, errors.New("memLease does not watch")
}

func grantedLease(seconds int32) *memLease {
	return &memLease{l: &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "invoices", Annotations: map[string]string{fencingv1.TokenAnnotation: "1"}},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("a"), LeaseDurationSeconds: ptr.To(seconds)},
	}}
}

// Deadline and Holding answer at once, from the last confirmed renewal and the clock read
// now: Holding turns false the moment the deadline passes, before the renewal goroutine
// has noticed anything.
func TestDeadlineAndHoldingAreSynchronous(t *testing.T) {
	start := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	c := clocktesting.NewFakeClock(start)
	m := grantedLease(15)
	var renewedAt []time.Time
	h, err := Start(context.Background(), Config{Leases: m, Namespace: "ns", LeaseName: "invoices", Identity: "a", Token: 1, Clock: c,
		Callbacks: Callbacks{OnRenewed: func(d time.Time) { renewedAt = append(renewedAt, d) }}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.end(ErrReleased)
	want := start.Add(14250 * time.Millisecond) // the 15 s lease less the 5 % margin
	if got := h.Deadline(); !got.Equal(want) || len(renewedAt) != 1 || !renewedAt[0].Equal(want) {
		t.Fatalf("Deadline() = %v, OnRenewed got %v, want %v", got, renewedAt, want)
	}
	if !h.Holding() {
		t.Fatal("not Holding right after the first renewal")
	}
	m.mu.Lock()
	m.cut = true
	m.mu.Unlock()
	c.SetTime(want) // the renewal goroutine's renewals now fail; the deadline is reached
	if h.Holding() {
		t.Fatal("Holding at the deadline")
	}
}

// Start is bounded: a first read or a first renewal that gets no answer ends it within
// StartTimeout and RenewDeadline, not whenever the caller's context ends.
func TestStartIsBoundedByTheLease(t *testing.T) {
	for _, tc := range []struct {
		name      string
		blockRead bool
		bound     time.Duration
	}{
		{name: "first read", blockRead: true, bound: 200 * time.Millisecond},
		{name: "first renewal", bound: 1500 * time.Millisecond}, // a 2 s lease: RenewDeadline 1.5 s
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := grantedLease(2)
			if tc.blockRead {
				m.block = true
			}
			cfg := Config{Leases: m, Namespace: "ns", LeaseName: "invoices", Identity: "a", Token: 1, StartTimeout: 200 * time.Millisecond}
			if !tc.blockRead {
				// The read answers; from the renewal on, nothing does.
				cfg.Leases = &blockUpdates{m}
			}
			began := time.Now()
			_, err := Start(context.Background(), cfg)
			took := time.Since(began)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Start = %v, want a deadline exceeded", err)
			}
			if took < tc.bound || took > tc.bound+5*time.Second {
				t.Fatalf("Start took %v, want about %v", took, tc.bound)
			}
		})
	}
}

// blockUpdates answers reads and never answers updates.
type blockUpdates struct{ *memLease }

func (b *blockUpdates) Leases(string) LeaseClient { return b }
func (b *blockUpdates) Update(ctx context.Context, _ *coordinationv1.Lease, _ metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// Holders granted together must not renew in step: each renewal comes up to 10 % early,
// at random, and never late.
func TestRenewalsAreJitteredEarlyNeverLate(t *testing.T) {
	const interval = 3 * time.Second
	seen := map[time.Duration]bool{}
	for range 1000 {
		d := jittered(interval)
		if d > interval || d < interval-interval/10 {
			t.Fatalf("jittered(%v) = %v, want within [%v, %v]", interval, d, interval-interval/10, interval)
		}
		seen[d] = true
	}
	if len(seen) < 100 {
		t.Fatalf("%d distinct waits in 1,000: holders would renew in step", len(seen))
	}
	if d := jittered(5); d != 5 {
		t.Fatalf("jittered(5ns) = %v: an interval too short to jitter is kept", d)
	}
}
