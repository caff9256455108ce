package leadership

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// ErrAPIServerBack ends a candidacy whose informers saw the API server unreachable, once
// it answers again: the next candidacy starts at once with fresh informers. The old ones
// would come back on client-go's reflector back-off — 800 ms doubling to 30 s between
// failed lists, reset only after two minutes without one — so a few outages in a row
// left a leader blind for half a minute.
var ErrAPIServerBack = errors.New("the API server answers again after an outage")

// errLeadershipLost is what controller-runtime's manager returns when its leader election
// ends without being asked to (pinned by a test).
const errLeadershipLost = "leader election lost"

// Campaign runs a replica's candidacies one after another in one process, until its
// context ends. A candidacy is one manager: its own caches and informers, a campaign for
// the leader Lease, and once elected one term of the leader's work. It ends when its
// leadership is lost, when the API server answers again after its informers saw it
// unreachable, or when it fails; the process does not exit.
//
// The next candidacy starts only after the last one's term has ended — every write of it
// refused from then on, through Term — and every runnable it added through
// Candidacy.Manager has returned. So no goroutine of an old term overlaps a new one.
type Campaign struct {
	// Guard fences the writes; each candidacy writes through its own Term of it.
	Guard *Guard
	// Lock is the leader-election lock, wrapped by Guard.Lock. Candidacies share it (and
	// its identity); the campaign releases it when it stops.
	Lock resourcelock.Interface
	// Build makes a candidacy's manager. It must elect with c.Lock(), not release on cancel
	// (the campaign releases once every runnable has stopped), add the leader's runnables
	// through c.Manager, and write through c.Term.
	Build func(c *Candidacy) (manager.Manager, error)
	// Probe asks the API server once whether it answers (nil), with its own short timeout.
	Probe func(ctx context.Context) error
	Log   logr.Logger

	// ProbeInterval is how often an outage, or an absent API server, is probed (default
	// 250 ms); RetryMax bounds the back-off after a failed candidacy (default 5 s).
	ProbeInterval, RetryMax time.Duration
}

// Run campaigns until ctx ends, then releases the leader Lease if it holds it.
func (cp *Campaign) Run(ctx context.Context) error {
	interval := orDefault(cp.ProbeInterval, 250*time.Millisecond)
	retryMax := orDefault(cp.RetryMax, 5*time.Second)
	var delay time.Duration
	for n := uint64(1); ; n++ {
		if err := cp.waitForAPIServer(ctx, interval); err != nil {
			return cp.release()
		}
		c := newCandidacy(cp.Guard.NewTerm(n), cp.Lock)
		began := time.Now()
		err := cp.run(ctx, c, interval)
		c.Term.End()
		waited := c.stop(cp.Log)
		if ctx.Err() != nil {
			cp.Log.Info("campaign stopped", "candidacy", n, "ranFor", time.Since(began).Round(time.Millisecond))
			return cp.release()
		}
		log := cp.Log.WithValues("candidacy", n, "ranFor", time.Since(began).Round(time.Millisecond), "runnablesStoppedIn", waited.Round(time.Millisecond))
		switch {
		case errors.Is(err, ErrAPIServerBack):
			log.Info("the API server answers again after an outage; campaigning with fresh informers")
			delay = 0
		case err != nil && err.Error() == errLeadershipLost:
			log.Info("leadership lost; every write of its term refused and its runnables stopped; campaigning again")
			delay = 0
		default:
			delay = min(max(2*delay, interval), retryMax)
			log.Error(err, "candidacy failed; campaigning again", "retryIn", delay)
			select {
			case <-ctx.Done():
				return cp.release()
			case <-time.After(delay):
			}
		}
	}
}

// run builds and runs one candidacy until it ends; an outage its informers or reconciles
// saw is probed while it runs, and ends it once the API server answers again.
func (cp *Campaign) run(ctx context.Context, c *Candidacy, interval time.Duration) error {
	mgr, err := cp.Build(c)
	if err != nil {
		return fmt.Errorf("building candidacy %d: %w", c.Term.N(), err)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go cp.watchOutage(ctx, c, interval, cancel)
	err = mgr.Start(ctx)
	if cause := context.Cause(ctx); errors.Is(cause, ErrAPIServerBack) {
		return cause
	}
	return err
}

// watchOutage probes while an outage is marked; when the API server answers after a probe
// found it gone, it ends the candidacy with ErrAPIServerBack. A probe that only ran out of
// time found the server slow, not gone: an overloaded server is not helped by every
// replica listing everything again.
func (cp *Campaign) watchOutage(ctx context.Context, c *Candidacy, interval time.Duration, end context.CancelCauseFunc) {
	t := time.NewTicker(interval)
	defer t.Stop()
	confirmed := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !c.outage.Load() {
			continue
		}
		err := cp.Probe(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err == nil && confirmed:
			end(ErrAPIServerBack)
			return
		case err == nil:
			c.outage.Store(false)
		case !errors.Is(err, context.DeadlineExceeded):
			confirmed = true
		}
	}
}

// waitForAPIServer returns once the API server answers, probing every interval (as an
// outage is probed), so a candidacy is never built — and its informers never start backing
// off — while the server is gone, and is built within interval of its return. (make chaos
// measured a back-off to 1 s here as most of the time from the server's return to the next
// grant.) It logs the first failure and then one in ten.
func (cp *Campaign) waitForAPIServer(ctx context.Context, interval time.Duration) error {
	began := time.Now()
	for attempt := 0; ; attempt++ {
		err := cp.Probe(ctx)
		if err == nil || ctx.Err() != nil {
			if attempt > 0 && err == nil {
				cp.Log.Info("the API server answers", "waited", time.Since(began).Round(time.Millisecond))
			}
			return ctx.Err()
		}
		if attempt%10 == 0 {
			cp.Log.Info("waiting for the API server before campaigning", "attempt", attempt+1,
				"waited", time.Since(began).Round(time.Millisecond), "error", err.Error())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}

// release gives the leader Lease up if this process holds it, as client-go does on
// cancel, but only now: after the last term's runnables stopped.
func (cp *Campaign) release() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rec, _, err := cp.Lock.Get(ctx)
	if err != nil || rec.HolderIdentity != cp.Lock.Identity() {
		return nil // not ours, or unknown: the lease runs out on its own
	}
	now := time.Now()
	if err := cp.Lock.Update(ctx, resourcelock.LeaderElectionRecord{
		LeaderTransitions: rec.LeaderTransitions, LeaseDurationSeconds: 1,
		RenewTime: metav1.NewTime(now), AcquireTime: metav1.NewTime(now),
	}); err != nil {
		cp.Log.Error(err, "releasing the leader Lease; a standby takes over when it runs out")
		return nil
	}
	cp.Log.Info("released the leader Lease")
	return nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}
