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

// TestAnEndedTermNeverWritesAgainEvenWhenTheProcessLeadsAgain is KEP-5366's concern: a
// goroutine of an old term that outlived it must not write once the same process has won
// leadership again and its Guard is certain once more.
func TestAnEndedTermNeverWritesAgainEvenWhenTheProcessLeadsAgain(t *testing.T) {
	c := clocktesting.NewFakeClock(t0)
	reg := prometheus.NewRegistry()
	g := NewGuard(c, 7*time.Second, reg)
	lock := g.Lock(&fakeLock{clock: c})
	ctx := context.Background()
	base := fake.NewClientBuilder().Build()
	cm := &corev1.ConfigMap{}
	cm.Namespace, cm.Name = "ns", "x"

	old := g.NewTerm(1)
	oldClient := old.Client(base)
	_ = lock.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "me"})
	if err := oldClient.Create(ctx, cm); err != nil {
		t.Fatalf("term 1 could not write while leading: %v", err)
	}
	c.Step(8 * time.Second) // past the renew deadline: leadership lost
	if err := oldClient.Update(ctx, cm); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("term 1 wrote after leadership was lost: %v", err)
	}
	old.End()

	next := g.NewTerm(2)
	_ = lock.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "me"}) // the same process leads again
	if g.Err() != nil {
		t.Fatal("the Guard is not certain after the new acquisition")
	}
	for name, write := range map[string]func(client.Client) error{
		"update":        func(cl client.Client) error { return cl.Update(ctx, cm) },
		"patch":         func(cl client.Client) error { return cl.Patch(ctx, cm, client.MergeFrom(cm.DeepCopy())) },
		"status update": func(cl client.Client) error { return cl.Status().Update(ctx, cm) },
		"delete":        func(cl client.Client) error { return cl.Delete(ctx, cm) },
	} {
		if err := write(oldClient); !errors.Is(err, ErrTermEnded) {
			t.Fatalf("term 1's %s after it ended and term 2 leads: %v, want ErrTermEnded", name, err)
		}
	}
	if !errors.Is(old.Err(), ErrTermEnded) || next.Err() != nil {
		t.Fatalf("term 1 Err %v, term 2 Err %v", old.Err(), next.Err())
	}
	if err := next.Client(base).Update(ctx, cm); err != nil {
		t.Fatalf("term 2 could not write while leading: %v", err)
	}
	if n := testutil.ToFloat64(g.refused); n != 5 {
		t.Fatalf("refused = %v, want 5 (one lost-leadership write, four of the ended term)", n)
	}
}
