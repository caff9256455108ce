package fencedlease

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/controllers/fencedlease/internal/decision"
)

// A pass remembers what took effect, not what it decided: a hand-off request whose
// status write failed is not remembered as asked, so the request that lands later gets
// its whole grace period; one that landed counts from the decision.
func TestRememberAHandoffOnlyOnceItsStatusLanded(t *testing.T) {
	c, tr, fl, pods, h := grantedRollout(10, 5)
	c.Step(time.Second)
	w := observeWorld(tr, c, fl, leaseFor(h, c.Now()), pods, []client.Object{rolloutOld.DeepCopy(), rolloutNew.DeepCopy()})
	d := decision.Decide(w)
	if !d.Asked() || !d.Plan.Has(decision.WriteStatus) {
		t.Fatalf("want a hand-off asked in the status write, got %+v", d.End)
	}
	if g := decision.Remember(w, d.Plan, decision.Landed{}, c.Now()).Of(h.PodUID, h.Token); !g.HandoffSince.IsZero() {
		t.Fatalf("a request whose status write failed is remembered as asked at %v", g.HandoffSince)
	}
	if g := decision.Remember(w, d.Plan, decision.Landed{Status: true}, c.Now()).Of(h.PodUID, h.Token); !g.HandoffSince.Equal(w.Now) {
		t.Fatalf("a request that landed is remembered at %v, want %v", g.HandoffSince, w.Now)
	}
}

// A revocation begun on the Lease (X3) is remembered with its reason until the status
// records it (X4), and only when the compare-and-swap landed.
func TestRememberARevocationOnlyOnceTheLeaseWasCut(t *testing.T) {
	c, tr, fl, pods, h := grantedToA()
	c.Step(11 * time.Second)
	w := observeWorld(tr, c, fl, leaseFor(h, t0), pods, nil)
	d := decision.Decide(w)
	if d.Revoked() == nil || !d.Plan.Has(decision.CutLease) {
		t.Fatalf("want a revocation that cuts the Lease first, got %+v", d.End)
	}
	if g := decision.Remember(w, d.Plan, decision.Landed{}, c.Now()).Of(h.PodUID, h.Token); g.Revoking.Reason != "" {
		t.Fatalf("a revocation whose compare-and-swap failed is remembered: %+v", g.Revoking)
	}
	g := decision.Remember(w, d.Plan, decision.Landed{LeaseCut: true}, c.Now()).Of(h.PodUID, h.Token)
	if g.Revoking.Reason != fencingv1.ReasonStartupDeadlineExceeded || !g.Revoking.At.Equal(w.Now) || g.Revoking.Lateness != time.Second {
		t.Fatalf("the revocation begun on the Lease is remembered as %+v", g.Revoking)
	}
}

// G2 on an idle FencedLease is remembered only once the Lease holds the grant, and the
// records of grants nobody names any more are dropped.
func TestRememberAGrantOnTheLeaseAndForgetTheRest(t *testing.T) {
	c := clocktesting.NewFakeClock(t0)
	tr := decision.NewGrantMemory(c)
	key := decision.SlotKey{Lease: types.NamespacedName{Namespace: "ns", Name: "invoices"}}
	gone := decision.Recall{}.Of("uid-gone", 3)
	gone.Renewal = gone.Observe(nil, t0)
	tr.Write(key, decision.Recall{gone.Key(): gone})
	fl := newFL(10)
	fl.Status.FencingToken = 3
	w := observeWorld(tr, c, fl, tombstone(3), []corev1.Pod{pod("a", t0)}, nil)
	d := decision.Decide(w)
	g := d.Granted()
	if g == nil || !d.GrantOnLease || d.StatusWait == 0 {
		t.Fatalf("want a grant on the Lease first, got %+v", d)
	}
	if out := decision.Remember(w, d.Plan, decision.Landed{}, c.Now()); len(out) != 0 {
		t.Fatalf("nothing landed, yet remembered %+v", out)
	}
	out := decision.Remember(w, d.Plan, decision.Landed{Lease: true}, c.Now())
	if at := out.Of(g.PodUID, g.Token).GrantedOnLeaseAt; !at.Equal(w.Now) {
		t.Fatalf("the grant on the Lease is remembered at %v, want %v", at, w.Now)
	}
	if _, kept := out[gone.Key()]; kept || len(out) != 1 {
		t.Fatalf("remembered %+v, want only the new grant", out)
	}
}
