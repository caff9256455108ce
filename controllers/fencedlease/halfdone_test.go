package fencedlease

import (
	"context"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// failingStatus refuses the next status write with a Conflict while armed: the write X4
// losing a race (or the controller crashing) after X3 cleared the Lease.
type failingStatus struct {
	client.Client
	armed bool
}

func (f *failingStatus) Status() client.SubResourceWriter {
	return &failingStatusWriter{SubResourceWriter: f.Client.Status(), f: f}
}

type failingStatusWriter struct {
	client.SubResourceWriter
	f *failingStatus
}

func (w *failingStatusWriter) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	if w.f.armed {
		w.f.armed = false
		return apierrors.NewConflict(schema.GroupResource{Group: fencingv1.GroupVersion.Group, Resource: "fencedleases"}, obj.GetName(), nil)
	}
	return w.SubResourceWriter.Update(ctx, obj, opts...)
}

// failStatusOnce makes the fixture's next status write fail.
func (f *casFixture) failStatusOnce() *failingStatus {
	fs := &failingStatus{Client: f.r.Client, armed: true}
	f.r.Client = fs
	return fs
}

func (f *casFixture) lastRevocation(t *testing.T) *fencingv1.Revocation {
	t.Helper()
	fl := &fencingv1.FencedLease{}
	if err := f.c.Get(context.Background(), key, fl); err != nil {
		t.Fatal(err)
	}
	return fl.Status.LastRevocation
}

func (f *casFixture) edit(t *testing.T, change func(*fencingv1.FencedLease), status bool) {
	t.Helper()
	fl := &fencingv1.FencedLease{}
	if err := f.c.Get(context.Background(), key, fl); err != nil {
		t.Fatal(err)
	}
	change(fl)
	var err error
	if status {
		err = f.c.Status().Update(context.Background(), fl)
	} else {
		err = f.c.Update(context.Background(), fl)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// Defect (a): a revoke request for a grant that never renewed acts at once (Q1). When
// the status write fails after the Lease was cleared, the next reconcile — of this
// process, or of a restarted one — still revokes at once, not after the startup deadline.
func TestARevokeRequestOfANeverRenewedGrantFinishesAtOnceAfterAFailedStatusWrite(t *testing.T) {
	for _, restart := range []bool{false, true} {
		f := newCASFixture(t) // a holds token 1 and never renewed; startup deadline 10 s
		f.edit(t, func(fl *fencingv1.FencedLease) {
			fl.Annotations = map[string]string{fencingv1.RevokeAnnotation: "1"}
		}, false)
		f.clock.Step(time.Second)
		fs := f.failStatusOnce()
		f.reconcile(t)
		if fs.armed {
			t.Fatal("the status write was never tried")
		}
		if name, _, _ := f.holder(t); name != "a" {
			t.Fatalf("the failed status write landed anyway: holder %q", name)
		}
		if restart {
			f.r.tracker = newRenewalTracker(f.clock)
		}
		f.clock.Step(100 * time.Millisecond)
		f.reconcile(t)
		if name, token, revocations := f.holder(t); name != "b" || token != 2 || revocations != 1 {
			t.Fatalf("restart=%v: holder %s token %d revocations %d, want b granted token 2 at once", restart, name, token, revocations)
		}
		if rv := f.lastRevocation(t); rv.Reason != fencingv1.ReasonRevokeRequested || rv.Token != 1 {
			t.Fatalf("restart=%v: revoked as %s, want RevokeRequested", restart, rv.Reason)
		}
	}
}

// Defect (b): a draining holder (asked to hand off, grace period not over) whose lease
// runs out is revoked for LeaseExpired, with its lateness. When the status write fails
// after the Lease was cleared, the reconcile that finishes it keeps that reason and
// observes the lateness once, instead of calling it HandoffTimeout and losing the sample.
func TestAnExpiredDrainingHolderStaysLeaseExpiredAfterAFailedStatusWrite(t *testing.T) {
	f := newCASFixture(t)
	f.renew(t)
	f.reconcile(t) // a renewed at t0: it runs on its 10 s lease from here
	f.edit(t, func(fl *fencingv1.FencedLease) {
		fl.Status.Holder.Handoff = &fencingv1.Handoff{SuccessorName: "b", SuccessorUID: "uid-b",
			RequestTime: *microTime(f.clock.Now()), GracePeriodSeconds: 30}
	}, true)
	f.reconcile(t) // the grace period starts; 30 s, far longer than the lease

	f.clock.Step(11 * time.Second) // expired a second ago, the grace period not over
	f.failStatusOnce()
	f.reconcile(t)
	if name, _, _ := f.holder(t); name != "a" {
		t.Fatalf("the failed status write landed anyway: holder %q", name)
	}
	f.clock.Step(100 * time.Millisecond)
	f.reconcile(t)
	if name, token, _ := f.holder(t); name != "b" || token != 2 {
		t.Fatalf("holder %s token %d, want b token 2", name, token)
	}
	if rv := f.lastRevocation(t); rv.Reason != fencingv1.ReasonLeaseExpired {
		t.Fatalf("revoked as %s, want LeaseExpired: the grace period was not over", rv.Reason)
	}
	m := &dto.Metric{}
	if err := f.r.Metrics.lateness.Write(m); err != nil {
		t.Fatal(err)
	}
	if n, sum := m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum(); n != 1 || sum < 0.9 || sum > 1.2 {
		t.Fatalf("lateness histogram has %d samples summing to %.3fs, want one of about 1s", n, sum)
	}
}
