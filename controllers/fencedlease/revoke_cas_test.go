package fencedlease

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/controllers/fencedlease/internal/decision"
)

// afterLeaseRead is a client that runs then right after it captured the Lease
// and before the controller decides: the moment a pause would fall.
type afterLeaseRead struct {
	client.Client
	then func()
	// podReads counts reads of single pods (the uncached reads by UID).
	podReads int
}

func (r *afterLeaseRead) Get(ctx context.Context, k client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, isPod := obj.(*corev1.Pod); isPod {
		r.podReads++
	}
	err := r.Client.Get(ctx, k, obj, opts...)
	if _, isLease := obj.(*coordinationv1.Lease); isLease && r.then != nil {
		r.then()
		r.then = nil
	}
	return err
}

// labeledPods lists pods by their lease label straight from a client: the podLister of
// unit tests that run the reconciler on a fake API server.
type labeledPods struct{ client.Reader }

func (l labeledPods) forLease(ns, name string) ([]corev1.Pod, error) {
	pods := &corev1.PodList{}
	err := l.List(context.Background(), pods, client.InNamespace(ns), client.MatchingLabels{fencingv1.LeaseLabel: name})
	return pods.Items, err
}

// casFixture is pod a holding token 1 on a 10 s lease, granted and seen at t0, with b
// waiting, in a fake API server.
type casFixture struct {
	c      client.Client
	clock  *clocktesting.FakeClock
	r      *Reconciler
	reader *afterLeaseRead
}

func newCASFixture(t *testing.T) *casFixture {
	t.Helper()
	return newCASFixtureWaiting(t, pod("b", t0.Add(time.Second)))
}

// newCASFixtureWaiting is newCASFixture with b the waiting pod given.
func newCASFixtureWaiting(t *testing.T, b corev1.Pod) *casFixture {
	t.Helper()
	fl := newFL(10)
	fl.Finalizers = []string{fencingv1.Finalizer}
	h := &fencingv1.Holder{PodName: "a", PodUID: "uid-a", Token: 1, AcquireTime: *decision.MicroTime(t0), LeaseDurationSeconds: 10}
	fl.Status = fencingv1.FencedLeaseStatus{FencingToken: 1, Holder: h, Transitions: 1}
	lease := leaseFor(h, t0)
	lease.Spec.LeaseDurationSeconds = ptr.To[int32](10)
	a := pod("a", t0)
	a.Annotations = map[string]string{fencingv1.StateAnnotation: string(fencingv1.PodHolding), fencingv1.TokenAnnotation: "1"}
	a.Spec.SchedulingGates = nil
	f := fixtureOf(fl, lease, &a, &b)
	f.reconcile(t) // the controller sees the grant at t0
	return f
}

// fixtureOf is a Reconciler on a fake clock at t0 and a fake client holding objs.
func fixtureOf(objs ...client.Object) *casFixture {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = fencingv1.AddToScheme(scheme)
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithStatusSubresource(&fencingv1.FencedLease{}).Build()
	clock := clocktesting.NewFakeClock(t0)
	reader := &afterLeaseRead{Client: c}
	// The Lease is read through the (cached) client: the hook sits there, and on the
	// uncached reader for the reads that fall back to it.
	r := &Reconciler{Client: reader, apiReader: reader, clock: clock, metrics: NewMetrics(prometheus.NewRegistry()), pods: labeledPods{c}}
	r.grants = decision.NewGrantMemory(clock)
	r.uncached = newUncachedLeases()
	return &casFixture{c: c, clock: clock, r: r, reader: reader}
}

func (f *casFixture) reconcile(t *testing.T) {
	t.Helper()
	f.reconcileFor(t)
}

// reconcileFor reconciles once and returns the result.
func (f *casFixture) reconcileFor(t *testing.T) ctrl.Result {
	t.Helper()
	res, err := f.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// expectFollowUp checks that res queues the next pass behind the Leases that must move
// (P1), then runs that pass, as the Lease's echo brings it.
func (f *casFixture) expectFollowUp(t *testing.T, res ctrl.Result) {
	t.Helper()
	if res.Priority == nil || *res.Priority != followUpPriority {
		t.Fatalf("the pass that wrote the grant on the Lease requeues at priority %v, want the follow-up's %d", res.Priority, followUpPriority)
	}
	f.reconcile(t)
}

// renew is the holder's renewal, written with the resourceVersion it read.
func (f *casFixture) renew(t *testing.T) {
	t.Helper()
	l := &coordinationv1.Lease{}
	if err := f.c.Get(context.Background(), key, l); err != nil {
		t.Fatal(err)
	}
	l.Spec.RenewTime = decision.MicroTime(f.clock.Now().Add(time.Hour)) // the holder's own clock: only the change counts
	if err := f.c.Update(context.Background(), l); err != nil {
		t.Fatal(err)
	}
}

func (f *casFixture) holder(t *testing.T) (string, int64, int64) {
	t.Helper()
	fl := f.fl(t)
	if fl.Status.Holder == nil {
		return "", fl.Status.FencingToken, fl.Status.Revocations
	}
	return fl.Status.Holder.PodName, fl.Status.Holder.Token, fl.Status.Revocations
}

// The clock is read before the Lease: a pause between the Lease read and the decision
// (here the clock jumping past expiry right after the read) cannot revoke a holder whose
// renewal the read might have missed. (X1)
func TestExpiryIsJudgedOnTheClockReadBeforeTheLease(t *testing.T) {
	f := newCASFixture(t)
	f.clock.Step(9 * time.Second)
	f.reader.then = func() { f.clock.Step(2 * time.Second) }
	f.reconcile(t)
	if name, token, revocations := f.holder(t); name != "a" || token != 1 || revocations != 0 {
		t.Fatalf("holder %s token %d revocations %d: revoked on a clock read after the Lease", name, token, revocations)
	}
}

// Revocation is a compare-and-swap on the Lease: a renewal that lands between the read
// and the revocation wins, and the holder keeps its grant.
func TestRevocationLosesToARenewalThatLandedAfterTheRead(t *testing.T) {
	f := newCASFixture(t)
	f.clock.Step(11 * time.Second) // expired by the controller's clock
	f.reader.then = func() { f.renew(t) }
	f.reconcile(t)
	if name, token, revocations := f.holder(t); name != "a" || token != 1 || revocations != 0 {
		t.Fatalf("holder %s token %d revocations %d: revoked a holder whose renewal landed", name, token, revocations)
	}
	l := &coordinationv1.Lease{}
	if err := f.c.Get(context.Background(), key, l); err != nil {
		t.Fatal(err)
	}
	if ptr.Deref(l.Spec.HolderIdentity, "") != "a" {
		t.Fatalf("the Lease lost its holder: %+v", l.Spec)
	}
	f.reconcile(t) // sees the renewal: a full duration from now
	if name, _, _ := f.holder(t); name != "a" {
		t.Fatalf("revoked right after its renewal was seen")
	}

	// Without a renewal, the same revocation goes through: the test can fail.
	f.clock.Step(11 * time.Second)
	f.reconcile(t)
	f.pastCoalesce(t)
	if name, token, revocations := f.holder(t); name != "b" || token != 2 || revocations != 1 {
		t.Fatalf("holder %s token %d revocations %d, want b token 2 after one revocation", name, token, revocations)
	}
	p := &corev1.Pod{}
	if err := f.c.Get(context.Background(), client.ObjectKey{Namespace: key.Namespace, Name: "a"}, p); err == nil && p.DeletionTimestamp == nil {
		t.Fatalf("the revoked pod a was neither deleted nor terminating: %v", p.Annotations)
	}
}
