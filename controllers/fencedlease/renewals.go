package fencedlease

import (
	"context"
	"maps"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/controllers/fencedlease/internal/decision"
	"github.com/fencedlease/fencedlease/pkg/leaserecord"
)

// observeRenewals wraps the Lease event handler (R2 in doc.go): a renewal of a settled
// grant — one the last pass kept, with its first renewal in the status and no hand-off,
// revocation or deletion under way — is recorded in the grant memory as its event arrives,
// and queues no pass. Nothing but the expiry waits for it, and the pass the expiry's timer
// brings judges the grant on this observation. So a holder's renewals cost no reconcile,
// and a queue that is long (thousands of FencedLeases, a server slow to answer the writes
// ahead) delays no observation: a renewal counts from when its event arrived, not from
// when a pass got to it. Any other Lease event is handled as before.
type observeRenewals struct {
	handler.EventHandler
	grants *decision.GrantMemory
}

func (o observeRenewals) Update(ctx context.Context, evt event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if o.recorded(evt.ObjectOld, evt.ObjectNew) {
		return
	}
	o.EventHandler.Update(ctx, evt, q)
}

// recorded is true when the update was a settled grant's renewal, now recorded.
func (o observeRenewals) recorded(oldObj, newObj any) bool {
	before, ok := oldObj.(*coordinationv1.Lease)
	if !ok {
		return false
	}
	after, ok := newObj.(*coordinationv1.Lease)
	if !ok || !renewalOnly(before, after) {
		return false
	}
	name, ok := after.Labels[fencingv1.LeaseLabel]
	rec := leaserecord.Read(after)
	if !ok || name == "" || rec.Holder == "" || !rec.Renewed() {
		return false
	}
	key := decision.SlotKey{Lease: types.NamespacedName{Namespace: after.Namespace, Name: name}, Slot: rec.Slot}
	return o.grants.RenewedOnEvent(key, rec.HolderUID, rec.Token, rec.RenewTime)
}

// renewalOnly is true when after differs from before in spec.RenewTime alone (beside the
// metadata the API server keeps): what a holder's renewal writes, and nothing else does.
func renewalOnly(before, after *coordinationv1.Lease) bool {
	if after.DeletionTimestamp != nil || after.Spec.RenewTime == nil || after.Spec.RenewTime.Equal(before.Spec.RenewTime) ||
		!maps.Equal(before.Labels, after.Labels) || !maps.Equal(before.Annotations, after.Annotations) {
		return false
	}
	b, a := before.Spec, after.Spec
	b.RenewTime, a.RenewTime = nil, nil
	return equality.Semantic.DeepEqual(b, a)
}
