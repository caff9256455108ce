package fencedlease

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/controllers/leadership"
)

// recovery reconciles every FencedLease the moment the API server is back after an
// outage: a reconcile that failed because the server was unreachable marks the outage; a
// probe then looks every probeInterval, and when the server answers, every FencedLease is
// queued at once — not left to its own timer or to the workqueue's back-off. In steady
// state it costs nothing.
type recovery struct {
	reader       client.Reader // uncached: the probe must reach the server
	cache        client.Reader
	events       chan event.GenericEvent
	interval     time.Duration
	probeTimeout time.Duration
	outage       atomic.Bool
	// candidacy, when set, is told of outages instead: the campaign probes and replaces the
	// whole manager, fresh informers and all, so this one does not run.
	candidacy *leadership.Candidacy
}

const (
	probeInterval = 250 * time.Millisecond
	// probeTimeout is how long the probe waits for an answer. A probe that runs out of it
	// found the server slow, not gone (a server that is gone refuses the connection, or
	// answers 5xx at once).
	probeTimeout = 2 * time.Second
)

func newRecovery(reader, cache client.Reader) *recovery {
	return &recovery{reader: reader, cache: cache, events: make(chan event.GenericEvent, 256),
		interval: probeInterval, probeTimeout: probeTimeout}
}

// observe marks an outage when err says the API server could not be reached: the
// candidacy's, when the manager is one (the campaign then replaces it), else its own.
func (rc *recovery) observe(err error) {
	switch {
	case rc == nil || !unreachable(err):
	case rc.candidacy != nil:
		rc.candidacy.MarkOutage()
	default:
		rc.outage.Store(true)
	}
}

// unreachable is leadership.Unreachable: a server that did not answer, or answered that
// it cannot serve now.
func unreachable(err error) bool { return leadership.Unreachable(err) }

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
		err := rc.probe(ctx)
		switch {
		case err == nil:
			rc.outage.Store(false)
			// Only after the probe itself was refused was the server really gone. A
			// timeout under load marks an outage too, but a server that answers, however
			// slowly, is overloaded, not down: its failed reconciles retry on their own
			// back-off, and queueing every FencedLease on top would only bury it (at
			// 10,000 it kept the queue full and left hundreds never granted).
			if confirmed {
				rc.requeueAll(ctx)
			}
			confirmed = false
		case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
			// Slow, not gone: the same overload. Keep probing.
		default:
			confirmed = true
		}
	}
}

// probe reads one FencedLease from the API server: nil when it answers.
func (rc *recovery) probe(ctx context.Context) error {
	probe, cancel := context.WithTimeout(ctx, rc.probeTimeout)
	defer cancel()
	return rc.reader.List(probe, &fencingv1.FencedLeaseList{}, client.Limit(1))
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
