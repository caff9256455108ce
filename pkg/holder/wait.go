package holder

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/pkg/leaserecord"
)

// StartWhenGranted is Start for a pod that runs before it is granted (a Warm standby): it
// waits until the Lease names cfg.Identity — and cfg.UID, when set — with a token, takes
// that token (cfg.Token is ignored), then confirms the grant with a first renewal, built
// on the Lease the watch delivered (no read in between), and renews as Start does. It
// returns when ctx ends first.
//
// The wait is one watch on the FencedLease's Leases (a label selector: its own, and one
// per slot when it has slots), not a loop of reads: a waiter costs the API server one
// long-lived watch, started anew each time the API server ends it (every 5 to 10
// minutes, or when it restarts). The slot comes from the Lease that grants the pod.
func StartWhenGranted(ctx context.Context, cfg Config) (*Holder, error) {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	for {
		lease, err := waitForGrant(ctx, cfg)
		if err != nil {
			return nil, err
		}
		cfg = grantedConfig(cfg, lease)
		// The first renewal builds on the Lease the watch delivered: no read between the
		// grant and the work.
		h, err := start(ctx, cfg, lease)
		if errors.Is(err, ErrRevoked) && ctx.Err() == nil {
			continue // the grant moved on before the first renewal: wait for the next
		}
		return h, err
	}
}

// WaitForGrant blocks until the Lease names cfg.Identity (and cfg.UID, when set) with a
// token, and returns that token; it renews nothing. See StartWhenGranted for its cost.
// Errors other than ctx's are retried: the API server may be away for a while.
func WaitForGrant(ctx context.Context, cfg Config) (int64, error) {
	lease, err := waitForGrant(ctx, cfg)
	if err != nil {
		return 0, err
	}
	return leaserecord.Read(lease).Token, nil
}

// WaitForSlotGrant is WaitForGrant that also says which slot the grant is in (0 in a
// FencedLease without slots).
func WaitForSlotGrant(ctx context.Context, cfg Config) (token int64, slot int32, _ error) {
	lease, err := waitForGrant(ctx, cfg)
	if err != nil {
		return 0, 0, err
	}
	rec := leaserecord.Read(lease)
	return rec.Token, rec.Slot, nil
}

// Granted is WaitForGrant that returns cfg completed from the grant: its Token, its Slot,
// and Sharded when the Lease it is granted on is a slot's. The grant, not the pod's
// environment, says so: a pod admitted before spec.holders was raised holds a slot all
// the same.
func Granted(ctx context.Context, cfg Config) (Config, error) {
	lease, err := waitForGrant(ctx, cfg)
	if err != nil {
		return cfg, err
	}
	return grantedConfig(cfg, lease), nil
}

// grantedConfig is cfg with the grant lease names: token, slot, and whether it is a slot.
func grantedConfig(cfg Config, lease *coordinationv1.Lease) Config {
	rec := leaserecord.Read(lease)
	cfg.Token, cfg.Slot = rec.Token, rec.Slot
	cfg.Sharded = cfg.Sharded || rec.InSlots
	return cfg
}

// waitForGrant returns the first Lease seen that grants cfg's pod.
func waitForGrant(ctx context.Context, cfg Config) (*coordinationv1.Lease, error) {
	c := cfg.Clock
	if c == nil {
		c = clock.RealClock{}
	}
	leases := cfg.Leases.Leases(cfg.Namespace)
	retry := waitRetryMin
	for {
		granted, err := watchForGrant(ctx, leases, cfg)
		if granted != nil {
			return granted, nil
		}
		if err == nil {
			retry = waitRetryMin // the watch ended normally: start over at once
			continue
		}
		// The watch failed (the API server away, or a role without watch): read the
		// FencedLease's own Lease before waiting to try again, so a grant there is taken
		// even then.
		if l, rerr := leases.Get(ctx, cfg.LeaseName, metav1.GetOptions{}); rerr == nil && grants(l, cfg) {
			return l, nil
		}
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-c.After(retry):
		}
		retry = min(2*retry, waitRetryMax)
	}
}

// The wait's back-off after a failed read or watch.
const (
	waitRetryMin = 250 * time.Millisecond
	waitRetryMax = 5 * time.Second
)

// grants is true when Lease l names cfg's pod (and its UID, when cfg has one) with a token.
func grants(l *coordinationv1.Lease, cfg Config) bool {
	rec := leaserecord.Read(l)
	if rec.Token < 1 || !rec.Names(cfg.Identity, rec.Token) {
		return false
	}
	return cfg.UID == "" || rec.HolderUID == cfg.UID // else an earlier pod of the same name
}

// watchForGrant watches every Lease of the FencedLease — one per slot; one without slots
// — until one grants cfg's pod (that Lease), the watch ends (nil, nil: watch again), or
// it fails. A watch from no version starts with every Lease there is. Whichever slot
// grants the pod, it is found: the pod need not know, when it starts, that the
// FencedLease has slots (spec.holders may be raised after it was admitted).
func watchForGrant(ctx context.Context, leases LeaseClient, cfg Config) (*coordinationv1.Lease, error) {
	// Like a reflector's: the API server ends the watch after 5 to 10 minutes, spread so
	// that many waiters do not come back at once.
	timeout := int64((5*time.Minute + rand.N(5*time.Minute)) / time.Second)
	opts := metav1.ListOptions{LabelSelector: fencingv1.LeaseLabel + "=" + cfg.LeaseName, TimeoutSeconds: ptr.To(timeout)}
	w, err := leases.Watch(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("watching Lease %s/%s: %w", cfg.Namespace, cfg.LeaseName, err)
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case ev, ok := <-w.ResultChan():
			if !ok {
				return nil, nil
			}
			switch ev.Type {
			case watch.Error:
				return nil, fmt.Errorf("watching Lease %s/%s: %w", cfg.Namespace, cfg.LeaseName, apierrors.FromObject(ev.Object))
			case watch.Added, watch.Modified:
				if l, ok := ev.Object.(*coordinationv1.Lease); ok && grants(l, cfg) {
					return l, nil
				}
			}
		}
	}
}
