package fencedlease

import (
	"context"
	"fmt"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/controllers/fencedlease/internal/decision"
	"github.com/fencedlease/fencedlease/internal/grantorder"
	"github.com/fencedlease/fencedlease/pkg/leaserecord"
)

// restart is the operator process ending and a new one taking over: everything it
// remembered is gone; only the API server's objects remain.
func (f *casFixture) restart() {
	f.r.grants = decision.NewGrantMemory(f.clock)
	f.r.uncached = newUncachedLeases()
}

// holderRenewsThenReleases is the holder the Lease names renewing once and then releasing
// (pkg/holder's Release: holderIdentity cleared, its UID kept), each a write with the
// resourceVersion it read.
func (f *casFixture) holderRenewsThenReleases(t *testing.T) {
	t.Helper()
	f.renew(t)
	l := f.lease(t)
	leaserecord.Release(l)
	if err := f.c.Update(context.Background(), l); err != nil {
		t.Fatal(err)
	}
}

// Defect 1 of issue 61: a silent holder a (token 1) is handed over on the Lease to b
// (token 2); the operator dies before the status records it; b renews and releases while
// it is down. The restarted operator must finish a's revocation from what the Lease
// shows — not write a's old token back on the Lease, not mark a Holding again, not grant
// b a second time — whether b was a Cold pod (patched with its token in the hand-over
// pass) or a Warm one (which starts on the Lease alone).
func TestAHandOverReleasedWhileTheOperatorWasDownStaysHandedOver(t *testing.T) {
	for _, warm := range []bool{false, true} {
		t.Run(fmt.Sprintf("warm=%v", warm), func(t *testing.T) {
			b := pod("b", t0.Add(time.Second))
			if warm {
				b = warmPod("b", t0.Add(time.Second))
			}
			f := newCASFixtureWaiting(t, b)
			f.renew(t)
			f.reconcile(t) // a renewed: it runs on its 10 s lease from here
			f.clock.Step(11 * time.Second)
			f.reconcile(t) // handed over to b on the Lease; the status waits for b's first renewal
			if got := leaserecord.Read(f.lease(t)); !got.Shows("b", "uid-b", 2) {
				t.Fatalf("the hand-over did not reach the Lease: %+v", got)
			}
			f.restart() // killed before the status write
			f.holderRenewsThenReleases(t)
			seen := newLeaseTokenWatch(f.lease(t))
			for range 6 {
				f.clock.Step(time.Second)
				f.reconcile(t)
				seen.check(t, f.lease(t))
			}
			fl := f.fl(t)
			if fl.Status.Holder != nil && (fl.Status.Holder.PodName == "a" || fl.Status.Holder.PodName == "b") {
				t.Fatalf("holder %+v after b released: a was revoked and b released", fl.Status.Holder)
			}
			if rv := fl.Status.LastRevocation; rv == nil || rv.PodName != "a" || rv.Token != 1 {
				t.Fatalf("last revocation %+v, want a's token 1", rv)
			}
			if fl.Status.FencingToken != 2 || fl.Status.Revocations != 1 {
				t.Fatalf("fencingToken %d revocations %d, want token 2 spent once and a revoked once", fl.Status.FencingToken, fl.Status.Revocations)
			}
			if !f.podGone(t, "a") {
				if st := grantorder.PodState(f.pod(t, "a")); st == fencingv1.PodHolding || st == fencingv1.PodDraining {
					t.Fatalf("the revoked pod a is marked %s again", st)
				}
			}
			if pb := f.pod(t, "b"); grantorder.PodState(pb) == fencingv1.PodHolding || grantorder.PodState(pb) == fencingv1.PodWaiting {
				t.Fatalf("b released token 2, yet its pod shows %s (token %q): it could be granted again",
					grantorder.PodState(pb), pb.Annotations[fencingv1.TokenAnnotation])
			}
		})
	}
}

// leaseTokenWatch checks that a Lease's token never goes down (the first invariant).
type leaseTokenWatch struct{ high int64 }

func newLeaseTokenWatch(l *coordinationv1.Lease) *leaseTokenWatch {
	return &leaseTokenWatch{high: leaserecord.Read(l).Token}
}

func (w *leaseTokenWatch) check(t *testing.T, l *coordinationv1.Lease) {
	t.Helper()
	got := leaserecord.Read(l)
	if got.Token < w.high {
		t.Fatalf("the Lease's token went down from %d to %d (holder %q)", w.high, got.Token, got.Holder)
	}
	w.high = got.Token
}
