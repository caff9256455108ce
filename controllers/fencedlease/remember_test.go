package fencedlease

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// A pass remembers what took effect, not what it decided: a hand-off request whose
// status write failed is not remembered as asked, so the request that lands later gets
// its whole grace period; one that landed counts from the decision.
func TestRememberAHandoffOnlyOnceItsStatusLanded(t *testing.T) {
	c, tr, fl, pods, h := grantedRollout(10, 5)
	c.Step(time.Second)
	w := observeWorld(tr, c, fl, leaseFor(h, c.Now()), pods, []client.Object{rolloutOld.DeepCopy(), rolloutNew.DeepCopy()})
	d := decide(w)
	if !d.asked() || !d.plan.has(writeStatus) {
		t.Fatalf("want a hand-off asked in the status write, got %+v", d.end)
	}
	if g := remember(w, d, landed{}, c.Now()).of(h.PodUID, h.Token); !g.handoffSince.IsZero() {
		t.Fatalf("a request whose status write failed is remembered as asked at %v", g.handoffSince)
	}
	if g := remember(w, d, landed{status: true}, c.Now()).of(h.PodUID, h.Token); !g.handoffSince.Equal(w.now) {
		t.Fatalf("a request that landed is remembered at %v, want %v", g.handoffSince, w.now)
	}
}

// A revocation begun on the Lease (X3) is remembered with its reason until the status
// records it (X4), and only when the compare-and-swap landed.
func TestRememberARevocationOnlyOnceTheLeaseWasCut(t *testing.T) {
	c, tr, fl, pods, h := grantedToA()
	c.Step(11 * time.Second)
	w := observeWorld(tr, c, fl, leaseFor(h, t0), pods, nil)
	d := decide(w)
	if d.revoked() == nil || !d.plan.has(cutLease) {
		t.Fatalf("want a revocation that cuts the Lease first, got %+v", d.end)
	}
	if g := remember(w, d, landed{}, c.Now()).of(h.PodUID, h.Token); g.revoking.reason != "" {
		t.Fatalf("a revocation whose compare-and-swap failed is remembered: %+v", g.revoking)
	}
	g := remember(w, d, landed{leaseCut: true}, c.Now()).of(h.PodUID, h.Token)
	if g.revoking.reason != fencingv1.ReasonStartupDeadlineExceeded || !g.revoking.at.Equal(w.now) || g.revoking.lateness != time.Second {
		t.Fatalf("the revocation begun on the Lease is remembered as %+v", g.revoking)
	}
}

// G2 on an idle FencedLease is remembered only once the Lease holds the grant, and the
// records of grants nobody names any more are dropped.
func TestRememberAGrantOnTheLeaseAndForgetTheRest(t *testing.T) {
	c := clocktesting.NewFakeClock(t0)
	tr := newGrantMemory(c)
	key := slotKey{lease: types.NamespacedName{Namespace: "ns", Name: "invoices"}}
	gone := recall{}.of("uid-gone", 3)
	gone.renewal = gone.observe(nil, t0)
	tr.write(key, recall{gone.key(): gone})
	fl := newFL(10)
	fl.Status.FencingToken = 3
	w := observeWorld(tr, c, fl, tombstone(3), []corev1.Pod{pod("a", t0)}, nil)
	d := decide(w)
	g := d.granted()
	if g == nil || !d.grantOnLease || d.statusWait == 0 {
		t.Fatalf("want a grant on the Lease first, got %+v", d)
	}
	if out := remember(w, d, landed{}, c.Now()); len(out) != 0 {
		t.Fatalf("nothing landed, yet remembered %+v", out)
	}
	out := remember(w, d, landed{lease: true}, c.Now())
	if at := out.of(g.PodUID, g.Token).grantedOnLeaseAt; !at.Equal(w.now) {
		t.Fatalf("the grant on the Lease is remembered at %v, want %v", at, w.now)
	}
	if _, kept := out[gone.key()]; kept || len(out) != 1 {
		t.Fatalf("remembered %+v, want only the new grant", out)
	}
}
