package holder

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/fencedlease/fencedlease/pkg/leaserecord"
)

// Every renewal changes renewTime, which is what the operator counts as a renewal: even
// the first one, by a holder whose clock reads the very microsecond the operator's grant
// wrote (renewTime = acquireTime), and even when the clock stands still.
func TestARenewalAlwaysChangesRenewTime(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 1500, time.UTC) // 1.5 µs: written as 1 µs
	m := grantedLease(15)
	granted := metav1.NewMicroTime(t0.Truncate(time.Microsecond))
	m.l.Spec.AcquireTime, m.l.Spec.RenewTime = granted.DeepCopy(), granted.DeepCopy()
	h, err := Start(context.Background(), Config{Leases: m, Namespace: "ns", LeaseName: "invoices", Identity: "a", Token: 1,
		Clock: clocktesting.NewFakeClock(t0)})
	if err != nil {
		t.Fatal(err)
	}
	defer h.end(ErrReleased)
	m.mu.Lock()
	first := m.l.DeepCopy()
	m.mu.Unlock()
	if !leaserecord.Read(first).Renewed() {
		t.Fatalf("the first renewal wrote renewTime %v over the grant's %v: the operator would not see it", first.Spec.RenewTime, granted)
	}
	if want := t0.Truncate(time.Microsecond).Add(time.Microsecond); !first.Spec.RenewTime.Time.Equal(want) {
		t.Fatalf("renewTime %v, want %v", first.Spec.RenewTime.Time, want)
	}

	// Otherwise renewTime is the clock at the field's precision, even a clock set back.
	for _, now := range []time.Time{t0.Add(time.Second), t0.Add(-time.Hour)} {
		l := first.DeepCopy()
		if leaserecord.Renew(l, now); !l.Spec.RenewTime.Time.Equal(now.Truncate(time.Microsecond)) {
			t.Errorf("Renew at %v wrote %v, want %v", now, l.Spec.RenewTime.Time, now.Truncate(time.Microsecond))
		}
	}
}
