package holder

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
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
// The wait is one watch on the one Lease (a field selector on its name), not a loop of
// reads: a waiter costs the API server one long-lived watch, one read when it starts,
// and one read and one new watch each time the API server ends the watch (every 5 to 10
// minutes, or when it restarts).
func StartWhenGranted(ctx context.Context, cfg Config) (*Holder, error) {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	for {
		lease, err := waitForGrant(ctx, cfg)
		if err != nil {
			return nil, err
		}
		cfg.Token = leaserecord.Read(lease).Token
		cfg.Slot = slotOf(lease)
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
	return leaserecord.Read(lease).Token, slotOf(lease), nil
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
		granted, rv, err := grantedIn(ctx, leases, cfg)
		if granted != nil {
			return granted, nil
		}
		if err == nil {
			granted, err = watchForGrant(ctx, leases, cfg, rv)
			if granted != nil {
				return granted, nil
			}
			if err == nil {
				retry = waitRetryMin // the watch ended normally: start over at once
				continue
			}
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

// grantedIn reads the Lease: the Lease when it grants cfg's pod (nil: not yet), and the
// resourceVersion to watch from. A missing Lease is watched from the start.
func grantedIn(ctx context.Context, leases LeaseClient, cfg Config) (*coordinationv1.Lease, string, error) {
	if cfg.Sharded {
		// Any slot's Lease may grant this pod: the watch from no version starts with
		// every one there is.
		return nil, "", nil
	}
	l, err := leases.Get(ctx, cfg.LeaseName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("reading Lease %s/%s: %w", cfg.Namespace, cfg.LeaseName, err)
	}
	if grants(l, cfg) {
		return l, "", nil
	}
	return nil, l.ResourceVersion, nil
}

// grants is true when Lease l names cfg's pod (and its UID, when cfg has one) with a token.
func grants(l *coordinationv1.Lease, cfg Config) bool {
	rec := leaserecord.Read(l)
	if rec.Token < 1 || !rec.Names(cfg.Identity, rec.Token) {
		return false
	}
	return cfg.UID == "" || rec.HolderUID == cfg.UID // else an earlier pod of the same name
}

// watchForGrant watches the Lease from resourceVersion rv until it grants cfg's pod
// (that Lease), the watch ends (nil, nil: read again), or it fails.
func watchForGrant(ctx context.Context, leases LeaseClient, cfg Config, rv string) (*coordinationv1.Lease, error) {
	// Like a reflector's: the API server ends the watch after 5 to 10 minutes, spread so
	// that many waiters do not come back at once.
	timeout := int64((5*time.Minute + rand.N(5*time.Minute)) / time.Second)
	opts := metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("metadata.name", cfg.LeaseName).String(),
		ResourceVersion: rv,
		TimeoutSeconds:  ptr.To(timeout),
	}
	if cfg.Sharded {
		opts.FieldSelector, opts.LabelSelector = "", fencingv1.LeaseLabel+"="+cfg.LeaseName
	}
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

// slotOf is the slot whose Lease l is: its slot label, 0 without one (slot 0's Lease has
// the FencedLease's name and no slot label).
func slotOf(l *coordinationv1.Lease) int32 {
	s, err := strconv.ParseInt(l.Labels[fencingv1.SlotLabel], 10, 32)
	if err != nil || s < 0 {
		return 0
	}
	return int32(s)
}
