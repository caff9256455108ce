package leadership

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Candidacy is one manager's run within a Campaign: its Term fences its writes, and the
// runnables added through Manager are waited for before the next candidacy starts.
type Candidacy struct {
	// Term fences this candidacy's writes (a Fence).
	Term *Term

	lock   resourcelock.Interface
	outage atomic.Bool

	mu      sync.Mutex
	stopped bool
	running sync.WaitGroup
}

func newCandidacy(t *Term, lock resourcelock.Interface) *Candidacy {
	return &Candidacy{Term: t, lock: lock}
}

// Lock is the campaign's leader-election lock for this candidacy's manager: a read or
// write of it that cannot reach the API server marks an outage. It is the one request a
// replica, leader or standby, makes every retry period whatever else it does — a
// reflector whose watch cannot restart backs off in silence, telling no handler.
func (c *Candidacy) Lock() resourcelock.Interface { return &outageLock{Interface: c.lock, c: c} }

// MarkOutage says the API server could not be reached: the campaign probes it and, once it
// answers, replaces this candidacy with a fresh one.
func (c *Candidacy) MarkOutage() { c.outage.Store(true) }

// WatchError is a cache.Options.DefaultWatchErrorHandler (and an informer's): it logs as
// client-go's default does, and marks an outage when the list or watch could not reach the
// API server.
func (c *Candidacy) WatchError(ctx context.Context, r *toolscache.Reflector, err error) {
	toolscache.DefaultWatchErrorHandler(ctx, r, err)
	if Unreachable(err) {
		c.MarkOutage()
	}
}

// Manager wraps mgr so that every runnable added through it is tracked: the campaign waits
// for all of them to return before it starts the next candidacy.
func (c *Candidacy) Manager(mgr manager.Manager) manager.Manager {
	return &trackingManager{Manager: mgr, c: c}
}

// stop refuses to start any more runnables and waits for the running ones, logging while
// it waits; it returns how long that took.
func (c *Candidacy) stop(log logr.Logger) time.Duration {
	began := time.Now()
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
	done := make(chan struct{})
	go func() { c.running.Wait(); close(done) }()
	for {
		select {
		case <-done:
			return time.Since(began)
		case <-time.After(5 * time.Second):
			log.Info("still waiting for the last term's runnables to stop before campaigning again",
				"candidacy", c.Term.N(), "waited", time.Since(began).Round(time.Second))
		}
	}
}

// begin counts a runnable as running, unless the candidacy stopped.
func (c *Candidacy) begin() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return false
	}
	c.running.Add(1)
	return true
}

type outageLock struct {
	resourcelock.Interface
	c *Candidacy

	mu     sync.Mutex
	holder string // who the last record read named
}

// ErrNoTakeoverInOutage refuses a takeover of the leader Lease while an outage is marked:
// see outageLock.Update.
var ErrNoTakeoverInOutage = errors.New("not taking the leader Lease over from its holder while an outage is marked: the next candidacy, with a fresh look, may")

func (l *outageLock) seen(err error) error {
	if Unreachable(err) {
		l.c.MarkOutage()
	}
	return err
}

func (l *outageLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	rec, raw, err := l.Interface.Get(ctx)
	if err == nil && rec != nil {
		l.mu.Lock()
		l.holder = rec.HolderIdentity
		l.mu.Unlock()
	}
	return rec, raw, l.seen(err)
}

func (l *outageLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	return l.seen(l.Interface.Create(ctx, ler))
}

// Update refuses to take the Lease over from another holder while an outage is marked. A
// standby's elector judges the leader gone by the last record it *observed*; across an
// outage that is the record from before it, so the first read after the server's return
// finds it expired and takes over at once — racing the leader, which re-acquires at once
// too (the Lease names it) and, unlike a new process, keeps what it saw of the holders
// (fencedlease.Memory). Refused here, the takeover waits for the next candidacy, whose
// elector looks afresh and waits a whole lease: the leader wins if it is alive, and a dead
// leader costs the standby one more lease. Renewals, re-acquisitions of our own record and
// the taking of a released one pass.
func (l *outageLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	l.mu.Lock()
	holder := l.holder
	l.mu.Unlock()
	if l.c.outage.Load() && ler.HolderIdentity == l.Identity() && holder != "" && holder != l.Identity() {
		return ErrNoTakeoverInOutage
	}
	return l.seen(l.Interface.Update(ctx, ler))
}

type trackingManager struct {
	manager.Manager
	c *Candidacy
}

func (m *trackingManager) Add(r manager.Runnable) error {
	return m.Manager.Add(&trackedRunnable{Runnable: r, c: m.c})
}

type trackedRunnable struct {
	manager.Runnable
	c *Candidacy
}

func (r *trackedRunnable) Start(ctx context.Context) error {
	if !r.c.begin() {
		return nil
	}
	defer r.c.running.Done()
	return r.Runnable.Start(ctx)
}

// NeedLeaderElection keeps the wrapped runnable's own answer (a runnable that does not say
// needs it, as controller-runtime assumes).
func (r *trackedRunnable) NeedLeaderElection() bool {
	if l, ok := r.Runnable.(manager.LeaderElectionRunnable); ok {
		return l.NeedLeaderElection()
	}
	return true
}
