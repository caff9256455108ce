package fencedlease

import (
	"context"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// labeledLeasesOnly is the operator's cache: it shows Leases with the lease label only.
type labeledLeasesOnly struct {
	client.Client
}

func (c labeledLeasesOnly) Get(ctx context.Context, k client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := c.Client.Get(ctx, k, obj, opts...); err != nil {
		return err
	}
	if l, ok := obj.(*coordinationv1.Lease); ok && l.Labels[fencingv1.LeaseLabel] == "" {
		return apierrors.NewNotFound(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, k.Name)
	}
	return nil
}

// countingReader is the API server behind the uncached reader; it counts Lease reads.
type countingReader struct {
	client.Reader
	leaseReads int
}

func (c *countingReader) Get(ctx context.Context, k client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*coordinationv1.Lease); ok {
		c.leaseReads++
	}
	return c.Reader.Get(ctx, k, obj, opts...)
}

// withLabeledCache makes f's reconciler read through a cache of labeled Leases only,
// with the API server behind its uncached reader; it returns the count of Lease reads
// that reached the API server.
func (f *casFixture) withLabeledCache() *countingReader {
	api := &countingReader{Reader: f.c}
	f.r.Client, f.r.apiReader = labeledLeasesOnly{Client: f.c}, api
	return api
}

// A grant on an idle FencedLease with no Lease reads nothing before it creates the
// Lease: the creation fails if any Lease of that name exists.
func TestAGrantCreatesTheLeaseWithoutReadingItFirst(t *testing.T) {
	f := newIdleFixture(t, 0)
	api := f.withLabeledCache()
	f.reconcile(t)
	if got := f.leaseOrNil(t); got == nil || got.Spec.HolderIdentity == nil || *got.Spec.HolderIdentity != "a" {
		t.Fatalf("the Lease after the grant: %+v", got)
	}
	if api.leaseReads != 0 {
		t.Fatalf("%d Lease reads from the API server before the Lease's creation, want 0", api.leaseReads)
	}
}

// A Lease of the FencedLease's name that someone else created is not in the operator's
// cache (it lacks the lease label). The grant's creation of the Lease is refused; from
// then on the Lease is read from the API server, the FencedLease says LeaseConflict, and
// nothing is granted, written to that Lease, or spent (A3).
func TestAForeignLeaseTheCacheDoesNotShowRefusesTheGrantAndIsReadFromThenOn(t *testing.T) {
	theirs := &coordinationv1.Lease{}
	theirs.Namespace, theirs.Name = key.Namespace, key.Name
	theirs.Annotations = map[string]string{fencingv1.TokenAnnotation: "41"}
	theirs.Spec.HolderIdentity = ptr.To("scheduler-0")
	f := newIdleFixture(t, 0)
	if err := f.c.Create(t.Context(), theirs); err != nil {
		t.Fatal(err)
	}
	api := f.withLabeledCache()
	for range 3 {
		f.reconcile(t)
	}
	fl := f.fl(t)
	if heldReason(fl.Status) != fencingv1.ReasonLeaseConflict || fl.Status.Holder != nil || fl.Status.FencingToken != 0 {
		t.Fatalf("status %+v: want LeaseConflict, no holder, token 0", fl.Status)
	}
	if api.leaseReads == 0 {
		t.Fatal("the Lease was never read from the API server after its creation was refused")
	}
	l := f.lease(t)
	if l.ResourceVersion != theirs.ResourceVersion || *l.Spec.HolderIdentity != "scheduler-0" {
		t.Fatalf("their Lease was written: %+v", l)
	}
	if a := f.pod(t, "a"); a.Annotations[fencingv1.TokenAnnotation] != "" || len(a.Spec.SchedulingGates) == 0 {
		t.Fatalf("a was granted on their Lease: %v, gates %v", a.Annotations, a.Spec.SchedulingGates)
	}
}
