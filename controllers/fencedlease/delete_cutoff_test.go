package fencedlease

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// A FencedLease deleted while its holder stands cut off on the Lease (a revoke request,
// its lease not run out yet) revokes that holder (D1) before it lets go: the pod is
// revoked (deleted, under DeletePod), and the finalizer goes only
// once no holder remains. Before, the cut-off rule kept the grant and the finalizer went
// anyway: the pod stayed Holding for good.
func TestDeletingAFencedLeaseWhoseHolderIsCutOffRevokesItFirst(t *testing.T) {
	f := newCASFixture(t)
	f.renew(t)
	f.reconcile(t) // a renewed: it runs on its 10 s lease
	f.edit(t, func(fl *fencingv1.FencedLease) {
		fl.Annotations = map[string]string{fencingv1.RevokeAnnotation: "1"}
	}, false)
	f.clock.Step(time.Second)
	f.reconcile(t)
	if l := f.lease(t); l.Spec.HolderIdentity != nil {
		t.Fatalf("want a cut off on the Lease first, the Lease names %q", *l.Spec.HolderIdentity)
	}
	if name, _, _ := f.holder(t); name != "a" {
		t.Fatalf("the cut-off holder must stand until its lease runs out; holder %q", name)
	}

	if err := f.c.Delete(context.Background(), f.fl(t)); err != nil {
		t.Fatal(err)
	}
	f.clock.Step(time.Second) // its lease has 8 s left
	f.reconcile(t)
	// Revoked under DeletePod: the pod is deleted.
	if !f.podGone(t, "a") {
		t.Fatalf("pod a after its FencedLease was deleted: state %q, want revoked and deleted", f.pod(t, "a").Annotations[fencingv1.StateAnnotation])
	}
	fl := &fencingv1.FencedLease{}
	if err := f.c.Get(context.Background(), key, fl); !apierrors.IsNotFound(err) {
		t.Fatalf("the FencedLease is still there (%v): %+v", err, fl.Status)
	}
}
