package fencedlease

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/pkg/leaserecord"
)

// statusWrites counts the status writes that reach the API server.
type statusWrites struct {
	client.Client
	n *atomic.Int32
}

func (c statusWrites) Status() client.SubResourceWriter {
	return countedStatus{c.Client.Status(), c.n}
}

type countedStatus struct {
	client.SubResourceWriter
	n *atomic.Int32
}

func (w countedStatus) Update(ctx context.Context, o client.Object, opts ...client.SubResourceUpdateOption) error {
	err := w.SubResourceWriter.Update(ctx, o, opts...)
	if err == nil {
		w.n.Add(1)
	}
	return err
}

// failingLeaseCreate fails the creation of the Lease named name.
type failingLeaseCreate struct {
	client.Client
	name string
}

var errInjected = errors.New("injected: the API server refused the write")

func (c failingLeaseCreate) Create(ctx context.Context, o client.Object, opts ...client.CreateOption) error {
	if _, lease := o.(*coordinationv1.Lease); lease && o.GetName() == c.name {
		return errInjected
	}
	return c.Client.Create(ctx, o, opts...)
}

// N4: both holders of a FencedLease with two slots stop renewing; one pass revokes both,
// and records both revocations in one status write.
func TestOnePassWritesTheStatusOnceForEverySlot(t *testing.T) {
	f := newSlotsFixture(t)
	var writes atomic.Int32
	f.r.Client = statusWrites{f.r.Client, &writes}
	f.clock.Step(11 * time.Second)
	f.reconcile(t)
	fl := fetch(t, f.c, key, &fencingv1.FencedLease{})
	for _, s := range fl.Status.Slots {
		if s.Holder != nil || s.LastRevocation == nil {
			t.Fatalf("slot %d after the pass: holder %v, last revocation %v; want both revoked", s.Slot, s.Holder, s.LastRevocation)
		}
	}
	if got := writes.Load(); got != 1 {
		t.Fatalf("the pass that revoked both slots wrote the status %d times, want once", got)
	}
	for i := range int32(2) {
		if rec := leaserecord.Read(f.slotLease(t, i)); rec.Holder != "" {
			t.Errorf("slot %d's Lease still names %q", i, rec.Holder)
		}
	}
}

// N5: the slots of a pass write at once, but their tokens land in order: when slot 0's
// grant on its Lease fails, slots 1 and 2 grant nothing in that pass, and the next pass
// grants tokens 1, 2 and 3 — none spent that no grant carries.
func TestSlotsGrantOnTheirLeasesInTokenOrder(t *testing.T) {
	fl := slotsFL(3)
	fl.Finalizers = []string{fencingv1.Finalizer}
	p0, p1, p2 := warmPod("p0", t0), warmPod("p1", t0.Add(time.Second)), warmPod("p2", t0.Add(2*time.Second))
	f := fixtureOf(fl, &p0, &p1, &p2)
	healthy := f.r.Client
	f.r.Client = failingLeaseCreate{healthy, key.Name}
	if _, err := f.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key}); !errors.Is(err, errInjected) {
		t.Fatalf("the pass whose slot 0 grant failed returned %v, want that failure", err)
	}
	for i := range int32(3) {
		if err := f.c.Get(context.Background(), slotLeaseKey(i), &coordinationv1.Lease{}); !apierrors.IsNotFound(err) {
			t.Fatalf("slot %d's Lease exists (%v) though slot 0's grant, a lower token, did not land", i, err)
		}
	}
	f.r.Client = healthy
	for range 4 {
		f.reconcile(t)
	}
	for i := range int32(3) {
		if rec := leaserecord.Read(f.slotLease(t, i)); rec.Token != int64(i)+1 || rec.Holder == "" {
			t.Errorf("slot %d's Lease: holder %q token %d; want a holder with token %d", i, rec.Holder, rec.Token, i+1)
		}
	}
}
