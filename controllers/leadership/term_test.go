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

// recordLock is a lock whose record is held in memory.
type recordLock struct {
	resourcelock.Interface
	rec     resourcelock.LeaderElectionRecord
	updates int
}

func (l *recordLock) Identity() string { return "me" }
func (l *recordLock) Get(context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	rec := l.rec
	return &rec, nil, nil
}
func (l *recordLock) Update(_ context.Context, ler resourcelock.LeaderElectionRecord) error {
	l.updates++
	l.rec = ler
	return nil
}

// TestAStandbyDoesNotTakeOverWhileAnOutageIsMarked: across an outage a standby's elector
// finds the leader's record expired by its last observation; the takeover waits for the
// next candidacy, while the leader's own re-acquisition, a renewal and taking a released
// Lease pass.
func TestAStandbyDoesNotTakeOverWhileAnOutageIsMarked(t *testing.T) {
	ctx := context.Background()
	real := &recordLock{rec: resourcelock.LeaderElectionRecord{HolderIdentity: "other"}}
	c := newCandidacy(NewGuard(clocktesting.NewFakeClock(t0), time.Second, nil).NewTerm(1), real)
	lock := c.Lock()
	if _, _, err := lock.Get(ctx); err != nil {
		t.Fatal(err)
	}
	mine := resourcelock.LeaderElectionRecord{HolderIdentity: "me"}

	c.MarkOutage()
	if err := lock.Update(ctx, mine); !errors.Is(err, ErrNoTakeoverInOutage) {
		t.Fatalf("a takeover from another holder during an outage: %v, want ErrNoTakeoverInOutage", err)
	}
	if real.updates != 0 {
		t.Fatal("the refused takeover was written")
	}

	real.rec.HolderIdentity = "" // released
	_, _, _ = lock.Get(ctx)
	if err := lock.Update(ctx, mine); err != nil {
		t.Fatalf("taking a released Lease during an outage: %v", err)
	}
	_, _, _ = lock.Get(ctx) // now names us
	if err := lock.Update(ctx, mine); err != nil {
		t.Fatalf("renewing our own record during an outage: %v", err)
	}

	fresh := newCandidacy(c.Term, &recordLock{rec: resourcelock.LeaderElectionRecord{HolderIdentity: "other"}})
	freshLock := fresh.Lock()
	_, _, _ = freshLock.Get(ctx)
	if err := freshLock.Update(ctx, mine); err != nil {
		t.Fatalf("a takeover with no outage marked: %v", err)
	}
}
