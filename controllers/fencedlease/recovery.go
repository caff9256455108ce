package fencedlease

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// recovery reconciles every FencedLease the moment the API server is back after an
// outage: a reconcile that failed because the server was unreachable marks the outage; a
// probe then looks every probeInterval, and when the server answers, every FencedLease is
// queued at once — not left to its own timer or to the workqueue's back-off. In steady
// state it costs nothing.
type recovery struct {
	reader   client.Reader // uncached: the probe must reach the server
	cache    client.Reader
	events   chan event.GenericEvent
	interval time.Duration
	outage   atomic.Bool
}

const probeInterval = 250 * time.Millisecond

func newRecovery(reader, cache client.Reader) *recovery {
	return &recovery{reader: reader, cache: cache, events: make(chan event.GenericEvent, 256), interval: probeInterval}
}

// observe marks an outage when err says the API server could not be reached.
func (rc *recovery) observe(err error) {
	if rc != nil && unreachable(err) {
		rc.outage.Store(true)
	}
}

// unreachable is true for errors of a server that did not answer, or answered that it
// cannot serve now: transport errors, timeouts, 503, 500, 429.
func unreachable(err error) bool {
	var netErr net.Error
	return err != nil && (errors.As(err, &netErr) || errors.Is(err, context.DeadlineExceeded) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
		apierrors.IsInternalError(err) || apierrors.IsTooManyRequests(err))
}

// Start probes while an outage is marked, until ctx ends. It runs on the leader only.
func (rc *recovery) Start(ctx context.Context) error {
	t := time.NewTicker(rc.interval)
	defer t.Stop()
	confirmed := false // the probe failed since the outage was marked
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if !rc.outage.Load() {
			continue
		}
		if rc.back(ctx) {
			rc.outage.Store(false)
			// Only after the probe itself failed was the server really gone. A timeout
			// under load marks an outage too, but a server that answers at once is slow,
			// not down: its failed reconciles retry on their own back-off, and queueing
			// every FencedLease on top would only bury them (at 10,000 it kept the queue
			// full and left hundreds never granted).
			if confirmed {
				rc.requeueAll(ctx)
			}
			confirmed = false
		} else {
			confirmed = true
		}
	}
}

// back is true when the API server answers a read.
func (rc *recovery) back(ctx context.Context) bool {
	probe, cancel := context.WithTimeout(ctx, rc.interval)
	defer cancel()
	return rc.reader.List(probe, &fencingv1.FencedLeaseList{}, client.Limit(1)) == nil
}

func (rc *recovery) requeueAll(ctx context.Context) {
	list := &fencingv1.FencedLeaseList{}
	if err := rc.cache.List(ctx, list); err != nil {
		rc.outage.Store(true) // try again at the next tick
		return
	}
	logf.FromContext(ctx).Info("API server back after an outage; reconciling every FencedLease", "count", len(list.Items))
	for i := range list.Items {
		select {
		case rc.events <- event.GenericEvent{Object: &list.Items[i]}:
		case <-ctx.Done():
			return
		}
	}
}

// NeedLeaderElection: only the leader reconciles.
func (rc *recovery) NeedLeaderElection() bool { return true }
