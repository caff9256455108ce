package plugin

import (
	"context"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/pkg/leaserecord"
)

// currentGrant is the grant in force: the one the Lease names when it is ahead of the
// status (the operator writes a grant on the Lease first, and the status records it with
// the holder's first renewal, up to 2 s later), else the status's holder; nil when none.
// pending says the status does not record it yet.
func currentGrant(fl *fencingv1.FencedLease, lease *coordinationv1.Lease) (h *fencingv1.Holder, pending bool) {
	rec := leaserecord.Read(lease)
	if rec.Foreign(fl.Name) || !rec.Ahead(fl.Status.FencingToken) {
		return fl.Status.Holder, false
	}
	h = &fencingv1.Holder{PodName: rec.Holder, PodUID: rec.HolderUID, Token: rec.Token, LeaseDurationSeconds: rec.DurationSeconds}
	if rec.AcquireTime != nil {
		h.AcquireTime = *rec.AcquireTime
	}
	return h, true
}

// readLease reads FencedLease fl's Lease: nil when there is none or the user may not read
// it (unreadable then says so).
func readLease(ctx context.Context, c client.Client, fl *fencingv1.FencedLease) (lease *coordinationv1.Lease, unreadable bool, err error) {
	return readSlotLease(ctx, c, fl, 0)
}

// readSlotLease reads the Lease of slot slot of fl (slot 0's is fl's own).
func readSlotLease(ctx context.Context, c client.Client, fl *fencingv1.FencedLease, slot int32) (lease *coordinationv1.Lease, unreadable bool, err error) {
	lease = &coordinationv1.Lease{}
	key := client.ObjectKey{Namespace: fl.Namespace, Name: fencingv1.SlotLeaseName(fl.Name, slot)}
	switch err := c.Get(ctx, key, lease); {
	case err == nil:
		return lease, false, nil
	case apierrors.IsForbidden(err):
		return nil, true, nil // the built-in view role cannot read Leases
	case apierrors.IsNotFound(err):
		return nil, false, nil
	default:
		return nil, false, err
	}
}
