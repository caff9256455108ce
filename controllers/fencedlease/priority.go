package fencedlease

import (
	"context"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fencedlease/fencedlease/controllers/fencedlease/internal/decision"
)

// The work queue has two priorities (P1 in doc.go). Judging a grant and moving the Lease
// — a revocation, a hand-over, a grant's first record, and for a Cold holder the pod
// writes it starts on — runs at normalPriority; what follows a grant that no holder waits
// for — a Warm holder's pod writes, a revoked pod's deletion (X6), the status write
// waiting for the first renewal (G4, X4) — and the passes that only see the controller's
// own writes come back run at followUpPriority. So when many FencedLeases are due at once
// (a node or a zone lost, a burst of new ones) every Lease moves before any of them
// spends writes nobody waits for; those are the same in number, later.
const (
	normalPriority   = 0
	followUpPriority = handler.LowPriority
)

// echoesFollowUp wraps an event handler: an event that only brings back a version this
// controller's own write produced (ownWrites.echo) queues its FencedLease at
// followUpPriority, unless something else queued it higher. Any other event — a holder's
// renewal, a pod the kubelet updated, a user's change — keeps the handler's priority.
type echoesFollowUp struct {
	handler.EventHandler
	own *ownWrites
}

func (e echoesFollowUp) Create(ctx context.Context, evt event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	e.EventHandler.Create(ctx, evt, e.queueFor(q, evt.Object))
}

func (e echoesFollowUp) Update(ctx context.Context, evt event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	e.EventHandler.Update(ctx, evt, e.queueFor(q, evt.ObjectNew))
}

func (e echoesFollowUp) queueFor(q workqueue.TypedRateLimitingInterface[reconcile.Request], obj client.Object) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request])
	if !ok || obj == nil || !e.own.echo(obj) {
		return q
	}
	return followUpQueue{pq}
}

// followUpQueue adds at followUpPriority at most.
type followUpQueue struct {
	priorityqueue.PriorityQueue[reconcile.Request]
}

func (q followUpQueue) Add(item reconcile.Request) {
	q.AddWithOpts(priorityqueue.AddOpts{}, item)
}

func (q followUpQueue) AddWithOpts(o priorityqueue.AddOpts, items ...reconcile.Request) {
	if o.Priority == nil || *o.Priority > followUpPriority {
		o.Priority = ptr.To(followUpPriority)
	}
	q.PriorityQueue.AddWithOpts(o, items...)
}

// priorityOf is the queue priority of a plan's requeue class.
func priorityOf(c decision.RequeueClass) *int {
	switch c {
	case decision.RequeueNormal:
		return ptr.To(normalPriority)
	case decision.RequeueFollowUp:
		return ptr.To(followUpPriority)
	}
	return nil
}
