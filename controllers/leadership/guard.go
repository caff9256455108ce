// Package leadership makes the operator keep its own rule: act only while authority is
// certainly yours. A Guard wraps the leader-election lock, remembers when the last
// acquisition or renewal that the API server confirmed was *sent*, and refuses the
// operator's writes once that is older than the renew deadline — on this process's
// monotonic clock, the moment it becomes true, not when the next failed renewal notices.
//
// Why that is enough: a standby takes over only a whole lease duration after it observed
// the last renewal, which landed after it was sent. With renew deadline < lease duration
// and clocks that run at about the same rate, a paused or partitioned leader has stopped
// writing before anyone else may start. It is the same rule pkg/holder applies to holders.
package leadership

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/clock"
)

// ErrNotLeader is returned for a write refused because leadership is not certain.
var ErrNotLeader = errors.New("not certainly the leader: the last confirmed leader-lease renewal is older than the renew deadline")

// Guard tracks this process's leadership from its own lock writes.
type Guard struct {
	clock         clock.PassiveClock
	renewDeadline time.Duration
	refused       prometheus.Counter

	mu sync.Mutex
	// confirmed is when the last acquisition or renewal the server accepted was sent;
	// zero while not leading.
	confirmed time.Time
}

// NewGuard returns a Guard that trusts a confirmed renewal for renewDeadline. reg may be nil.
func NewGuard(c clock.PassiveClock, renewDeadline time.Duration, reg prometheus.Registerer) *Guard {
	g := &Guard{clock: c, renewDeadline: renewDeadline, refused: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fencedlease_leader_writes_refused_total",
		Help: "Writes the operator refused to send because its leadership was not certain (its last confirmed leader-lease renewal was older than the renew deadline).",
	})}
	if reg != nil {
		reg.MustRegister(g.refused)
	}
	return g
}

// Lock wraps the leader-election lock so the Guard sees every write the elector makes.
func (g *Guard) Lock(l resourcelock.Interface) resourcelock.Interface {
	return &guardedLock{Interface: l, g: g}
}

// Err is nil while leadership is certain, ErrNotLeader otherwise.
func (g *Guard) Err() error {
	now := g.clock.Now() // read before judging, as everywhere
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.confirmed.IsZero() || now.Sub(g.confirmed) >= g.renewDeadline {
		return ErrNotLeader
	}
	return nil
}

// refuse counts and returns the refusal of a write, or nil when it may go ahead.
func (g *Guard) refuse() error {
	err := g.Err()
	if err != nil {
		g.refused.Inc()
	}
	return err
}

// record notes the outcome of a lock write sent at sent, naming holder.
func (g *Guard) record(sent time.Time, holder, self string, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case err != nil:
		// Unknown outcome: the last confirmed renewal still counts, and only it.
	case holder == self:
		if sent.After(g.confirmed) {
			g.confirmed = sent
		}
	default:
		g.confirmed = time.Time{} // released, or written for someone else
	}
}

type guardedLock struct {
	resourcelock.Interface
	g *Guard
}

func (l *guardedLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	sent := l.g.clock.Now()
	err := l.Interface.Create(ctx, ler)
	l.g.record(sent, ler.HolderIdentity, l.Identity(), err)
	return err
}

func (l *guardedLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	sent := l.g.clock.Now()
	err := l.Interface.Update(ctx, ler)
	l.g.record(sent, ler.HolderIdentity, l.Identity(), err)
	return err
}
