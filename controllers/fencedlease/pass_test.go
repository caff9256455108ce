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
	"github.com/fencedlease/fencedlease/controllers/fencedlease/internal/decision"
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

// failoverWrites counts the writes that fail over one holder of f — renewed at t0, lease
// 10 s — to its waiting pod while renewOthers keeps the rest renewing, until the status
// records the new holder's first renewal (renewNew).
func failoverWrites(t *testing.T, f *casFixture, renewOthers, renewNew func()) int {
	t.Helper()
	counter := &crashingClient{Client: f.r.Client, budget: -1}
	f.r.Client = counter
	f.clock.Step(6 * time.Second)
	renewOthers()
	f.reconcile(t)
	f.clock.Step(5 * time.Second) // the holder's lease ran out
	for range 3 {
		f.reconcile(t)
	}
	f.clock.Step(200 * time.Millisecond)
	renewNew()
	for range 3 {
		f.reconcile(t)
	}
	return counter.writes
}

// One slot failing over among slots that renew makes the writes of a FencedLease of one
// grant failing over: the summary of the whole FencedLease (waiting, holding) waits for
// the new grant's record instead of a status write of its own.
func TestOneSlotFailsOverWithTheWritesOfOneFencedLease(t *testing.T) {
	single := newCASFixtureWaiting(t, pod("w", t0.Add(time.Second)))
	want := failoverWrites(t, single, func() {}, func() { single.renew(t) })
	if h := fetch(t, single.c, key, &fencingv1.FencedLease{}).Status.Holder; h == nil || h.PodName != "w" || h.FirstRenewTime == nil {
		t.Fatalf("the FencedLease of one grant: holder %+v, want w recorded with its first renewal", h)
	}
	slots := newSlotsFixture(t, pod("w", t0.Add(time.Second)))
	got := failoverWrites(t, slots, func() { slots.renewSlot(t, 0) }, func() { slots.renewSlot(t, 1) })
	fl := fetch(t, slots.c, key, &fencingv1.FencedLease{})
	if h := fl.Status.Slots[1].Holder; h == nil || h.PodName != "w" || h.FirstRenewTime == nil {
		t.Fatalf("slot 1: holder %+v, want w recorded with its first renewal", h)
	}
	if h := fl.Status.Slots[0].Holder; h == nil || h.PodName != "a" {
		t.Fatalf("slot 0: holder %+v, want a still", h)
	}
	if got != want {
		t.Fatalf("one slot of two failing over made %d writes, a FencedLease of one grant %d", got, want)
	}
}

// N5: the slot whose expiry timer brought the pass is judged first, so its hand-over
// waits for no other slot's judging: slot 2's lease ends first, and when slot 0's has
// ended too by the time the pass runs, slot 2 is handed over first, with the lower token.
func TestTheSlotWhoseTimerBroughtThePassIsJudgedFirst(t *testing.T) {
	a, c, e := slotHolder("a", 1, true), slotHolder("c", 2, true), slotHolder("e", 3, true)
	a.LeaseDurationSeconds, c.LeaseDurationSeconds, e.LeaseDurationSeconds = 10, 10, 10
	fl := slotsFL(3, fencingv1.Slot{Slot: 0, Holder: a}, fencingv1.Slot{Slot: 1, Holder: c}, fencingv1.Slot{Slot: 2, Holder: e})
	fl.Finalizers = []string{fencingv1.Finalizer}
	b, d := warmPod("b", t0.Add(time.Second)), warmPod("d", t0.Add(2*time.Second))
	f := fixtureOf(fl, slotLeaseNaming(0, a, t0), slotLeaseNaming(1, c, t0), slotLeaseNaming(2, e, t0),
		holdingPod("a", 1, 0), holdingPod("c", 2, 1), holdingPod("e", 3, 2), &b, &d)
	f.reconcile(t) // every grant seen at t0
	f.clock.Step(2 * time.Second)
	f.renewSlot(t, 0)
	f.renewSlot(t, 1)
	if res := f.reconcileFor(t); res.RequeueAfter != 8*time.Second {
		t.Fatalf("the pass after slots 0 and 1 renewed asks again in %v, want 8s: slot 2's lease ends first", res.RequeueAfter)
	}
	f.clock.Step(11 * time.Second) // slot 2's lease ended 3 s ago, slot 0's 1 s ago
	f.renewSlot(t, 1)
	f.reconcile(t)
	first, second := leaserecord.Read(f.slotLease(t, 2)), leaserecord.Read(f.slotLease(t, 0))
	if first.Holder != "b" || second.Holder != "d" || first.Token >= second.Token {
		t.Fatalf("slot 2's Lease names %s (token %d), slot 0's %s (token %d); want slot 2 handed over first, to b, with the lower token",
			first.Holder, first.Token, second.Holder, second.Token)
	}
}

// slowStatusWrites is a client whose status writes take d on the fake clock.
type slowStatusWrites struct {
	client.Client
	clock interface{ Step(time.Duration) }
	d     time.Duration
}

func (c slowStatusWrites) Status() client.SubResourceWriter {
	return slowStatus{c.Client.Status(), c.clock, c.d}
}

type slowStatus struct {
	client.SubResourceWriter
	clock interface{ Step(time.Duration) }
	d     time.Duration
}

func (w slowStatus) Update(ctx context.Context, o client.Object, opts ...client.SubResourceUpdateOption) error {
	w.clock.Step(w.d)
	return w.SubResourceWriter.Update(ctx, o, opts...)
}

// X2: the next look at a lease is due when it could run out, counted from the decision,
// not from the end of the pass that made it: a pass whose status write took 300 ms asks
// to run again 300 ms sooner.
func TestTheNextLookCountsFromTheDecisionNotThePassEnd(t *testing.T) {
	f := newCASFixture(t)
	f.clock.Step(time.Second)
	f.renew(t)
	f.r.Client = slowStatusWrites{f.r.Client, f.clock, 300 * time.Millisecond}
	res := f.reconcileFor(t) // records a's first renewal: a status write
	if h := fetch(t, f.c, key, &fencingv1.FencedLease{}).Status.Holder; h == nil || h.FirstRenewTime == nil {
		t.Fatalf("the pass did not record the first renewal: %+v", h)
	}
	if want := 10*time.Second - 300*time.Millisecond; res.RequeueAfter != want {
		t.Fatalf("the pass asks to run again in %v, want %v: the lease, renewed when the pass began, runs out 10s after that", res.RequeueAfter, want)
	}
}

// P1 across slots: a pass that hands slot 0 over on its Lease to a Warm standby writes
// nothing else — not slot 1's first renewal, which only the status records; the next
// pass, which moves no Lease, writes that status.
func TestAPassThatHandsOverOnALeaseLeavesTheOtherSlotsStatusToTheNext(t *testing.T) {
	a, c := slotHolder("a", 1, true), slotHolder("c", 2, false)
	a.LeaseDurationSeconds, c.LeaseDurationSeconds = 10, 10
	fl := slotsFL(2, fencingv1.Slot{Slot: 0, Holder: a}, fencingv1.Slot{Slot: 1, Holder: c})
	fl.Finalizers = []string{fencingv1.Finalizer}
	b := warmPod("b", t0.Add(time.Second))
	f := fixtureOf(fl, slotLeaseNaming(0, a, t0), slotLeaseNaming(1, c, t0), holdingPod("a", 1, 0), holdingPod("c", 2, 1), &b)
	f.reconcile(t) // both grants seen at t0; c has not renewed yet
	var writes atomic.Int32
	f.r.Client = statusWrites{f.r.Client, &writes}
	f.clock.Step(11 * time.Second) // a's lease ran out; c renews for the first time
	f.renewSlot(t, 1)
	res := f.reconcileFor(t)
	if got := leaserecord.Read(f.slotLease(t, 0)); !got.Shows("b", "uid-b", 3) {
		t.Fatalf("slot 0's Lease shows %+v, want b handed token 3", got)
	}
	if n := writes.Load(); n != 0 {
		t.Fatalf("the pass that handed slot 0 over wrote the status %d times, want none: slot 1's record waits for a pass that moves no Lease", n)
	}
	if res.RequeueAfter <= 0 || res.RequeueAfter > decision.CacheBehind {
		t.Fatalf("the pass asks to run again in %v, want within %v: its deferred work must not wait on a lease", res.RequeueAfter, decision.CacheBehind)
	}
	f.reconcile(t)
	st := fetch(t, f.c, key, &fencingv1.FencedLease{}).Status
	if writes.Load() == 0 || len(st.Slots) < 2 || st.Slots[1].Holder == nil || st.Slots[1].Holder.FirstRenewTime == nil {
		t.Fatalf("after the next pass (%d status writes), slot 1's status is %+v, want c's first renewal recorded", writes.Load(), st.Slots)
	}
}
