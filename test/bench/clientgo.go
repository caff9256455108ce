package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// timings are client-go leader election's lease duration, renew deadline and retry period.
type timings struct {
	lease, renew, retry time.Duration
}

func (t timings) String() string {
	return fmt.Sprintf("%g/%g/%g s", t.lease.Seconds(), t.renew.Seconds(), t.retry.Seconds())
}

// lostLeaders records client-go leaders that lost leadership while nobody stopped them.
var lostLeaders losses

// elector is one client-go leader-election candidate for one lock.
type elector struct {
	identity string
	cancel   context.CancelFunc
	// started is closed when it became leader; startedAt says when.
	started   chan struct{}
	startedAt time.Time
	done      chan struct{}
}

// runElector starts a candidate for Lease ns/name; releaseOnCancel makes its stop a
// hand-off (the Lease released at once) instead of a crash.
func runElector(ctx context.Context, cs kubernetes.Interface, ns, name, identity string, t timings, releaseOnCancel bool) (*elector, error) {
	e := &elector{identity: identity, started: make(chan struct{}), done: make(chan struct{})}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: ns, Name: name},
		Client:     cs.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
	}
	var once sync.Once
	run, cancel := context.WithCancel(ctx)
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   t.lease,
		RenewDeadline:   t.renew,
		RetryPeriod:     t.retry,
		ReleaseOnCancel: releaseOnCancel,
		Name:            name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) {
				once.Do(func() { e.startedAt = time.Now(); close(e.started) })
			},
			OnStoppedLeading: func() {
				if run.Err() == nil && e.leading() {
					lostLeaders.add(ns, time.Now()) // gave up on its own: its renewals did not get through in time
				}
			},
		},
	})
	if err != nil {
		cancel()
		return nil, err
	}
	e.cancel = cancel
	go func() { defer close(e.done); le.Run(run) }()
	return e, nil
}

// stop ends the candidate and waits until it has (a released lock is released by then).
func (e *elector) stop() {
	e.cancel()
	<-e.done
}

func (e *elector) leading() bool {
	select {
	case <-e.started:
		return true
	default:
		return false
	}
}
