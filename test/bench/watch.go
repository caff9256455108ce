package bench

import (
	"context"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// transition is one Lease passing from one holder to the next, as a watch saw it.
type transition struct {
	from, to string
	// at is when the watch delivered the Lease naming the new holder.
	at time.Time
	// lastRenew is the last renewTime the old holder wrote; zero if none was seen.
	lastRenew time.Time
	duration  time.Duration
}

// overshoot is how long after the old holder's lease ran out the next holder was named.
func (t transition) overshoot() time.Duration {
	return t.at.Sub(t.lastRenew.Add(t.duration))
}

// namedSince keeps the transitions that named their holder at or after from.
func namedSince(ts []transition, from time.Time) []transition {
	kept := make([]transition, 0, len(ts))
	for _, t := range ts {
		if !t.at.Before(from) {
			kept = append(kept, t)
		}
	}
	return kept
}

type leaseView struct {
	holder    string
	lastRenew time.Time
}

// leaseWatch follows every Lease in the cluster and records each change of holder, for
// the operator's Leases and client-go's alike: the same observer for both.
type leaseWatch struct {
	mu      sync.Mutex
	views   map[string]*leaseView
	history map[string][]transition
	// waiters are told when a Lease names a new holder.
	waiters []chan struct{}
	// onLease is told of every Lease the watch sees (the simulated holders start from it:
	// one watch for both sides, so the operator's Leases cost the server no extra watcher).
	onLease func(*coordinationv1.Lease)
	// store holds the Leases as last seen.
	store cache.Store
}

func watchLeases(ctx context.Context, cs kubernetes.Interface, onLease func(*coordinationv1.Lease)) *leaseWatch {
	w := &leaseWatch{views: map[string]*leaseView{}, history: map[string][]transition{}, onLease: onLease}
	factory := informers.NewSharedInformerFactory(cs, 0)
	inf := factory.Coordination().V1().Leases().Informer()
	w.store = inf.GetStore()
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { w.saw(o.(*coordinationv1.Lease)) },
		UpdateFunc: func(_, o any) { w.saw(o.(*coordinationv1.Lease)) },
	})
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	return w
}

func (w *leaseWatch) saw(l *coordinationv1.Lease) {
	now := time.Now()
	w.onLease(l)
	key := l.Namespace + "/" + l.Name
	holder := ""
	if l.Spec.HolderIdentity != nil {
		holder = *l.Spec.HolderIdentity
	}
	var renew time.Time
	if l.Spec.RenewTime != nil {
		renew = l.Spec.RenewTime.Time
	}
	d := time.Duration(0)
	if l.Spec.LeaseDurationSeconds != nil {
		d = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	v := w.views[key]
	if v == nil {
		v = &leaseView{}
		w.views[key] = v
	}
	switch {
	case holder == "":
		// Cleared (a revocation's compare-and-swap, or a release): the last holder's
		// renewals stay what they were.
		return
	case holder != v.holder:
		if v.holder != "" {
			w.history[key] = append(w.history[key], transition{from: v.holder, to: holder, at: now, lastRenew: v.lastRenew, duration: d})
		} else {
			w.history[key] = append(w.history[key], transition{to: holder, at: now, duration: d})
		}
		v.holder, v.lastRenew = holder, time.Time{}
		for _, c := range w.waiters {
			select {
			case c <- struct{}{}:
			default:
			}
		}
	}
	// The operator's grant-time write carries renewTime = acquireTime; only later ones are
	// the holder's own. Either way the newest is the last renewal that counts.
	if renew.After(v.lastRenew) {
		v.lastRenew = renew
	}
}

// holderOf is the holder the watch last saw on Lease key.
func (w *leaseWatch) holderOf(key string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if v := w.views[key]; v != nil {
		return v.holder
	}
	return ""
}

// lease is the Lease key as the watch last saw it; nil if never.
func (w *leaseWatch) lease(key string) *coordinationv1.Lease {
	o, ok, err := w.store.GetByKey(key)
	if err != nil || !ok {
		return nil
	}
	return o.(*coordinationv1.Lease)
}

// lastTransitionTo returns the transition that named holder on Lease key.
func (w *leaseWatch) lastTransitionTo(key, holder string) (transition, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	h := w.history[key]
	for i := len(h) - 1; i >= 0; i-- {
		if h[i].to == holder {
			return h[i], true
		}
	}
	return transition{}, false
}

// waitFor waits until every key names its wanted holder ("": any holder), and returns
// the transitions that named them.
func (w *leaseWatch) waitFor(ctx context.Context, want map[string]string) ([]transition, error) {
	wake := make(chan struct{}, 1)
	w.mu.Lock()
	w.waiters = append(w.waiters, wake)
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		for i, c := range w.waiters {
			if c == wake {
				w.waiters = append(w.waiters[:i], w.waiters[i+1:]...)
				break
			}
		}
		w.mu.Unlock()
	}()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		done := true
		for key, holder := range want {
			if got := w.holderOf(key); got == "" || holder != "" && got != holder {
				done = false
				break
			}
		}
		if done {
			out := make([]transition, 0, len(want))
			for key, holder := range want {
				if holder == "" {
					holder = w.holderOf(key)
				}
				t, _ := w.lastTransitionTo(key, holder)
				out = append(out, t)
			}
			return out, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-wake:
		case <-tick.C:
		}
	}
}
