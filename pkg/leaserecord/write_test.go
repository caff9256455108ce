package leaserecord

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// Each writer is one step of the protocol, and Read tells the state it leaves: what one
// binary writes, every other reads alike.
func TestEveryWriterLeavesTheStateReadersExpect(t *testing.T) {
	grantA := Grant{Holder: "a", HolderUID: "uid-a", Token: 3, AcquireTime: t0, DurationSeconds: 15}
	fresh := func() *coordinationv1.Lease {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "invoices"}}
		Own(l, "invoices", 3)
		WriteGrant(l, grantA, nil)
		return l
	}
	if got := fresh(); !equality.Semantic.DeepEqual(got, granted()) {
		t.Fatalf("Own + WriteGrant on a new Lease:\n got %+v\nwant %+v", got, granted())
	}
	for _, tc := range []struct {
		name   string
		write  func(*coordinationv1.Lease)
		want   State
		reason string
		// asIdle reads the state as a FencedLease whose status names no grant does.
		asIdle bool
	}{
		{name: "granted", write: func(*coordinationv1.Lease) {}, want: StateGranted},
		{name: "renewed by the holder", write: func(l *coordinationv1.Lease) { Renew(l, t0.Add(time.Second)) }, want: StateRenewed},
		{name: "renewed at the grant's very microsecond", write: func(l *coordinationv1.Lease) { Renew(l, t0.Time) }, want: StateRenewed},
		{name: "released by the holder", write: Release, want: StateReleased},
		{name: "cut off on request", write: func(l *coordinationv1.Lease) { CutOff(l, "") }, want: StateCutOff},
		{name: "revoked (X3)", write: func(l *coordinationv1.Lease) { CutOff(l, fencingv1.ReasonLeaseExpired) }, want: StateCutOff,
			reason: string(fencingv1.ReasonLeaseExpired)},
		{name: "vacated: the tombstone", write: Vacate, want: StateTombstone, asIdle: true},
		{name: "re-granted after a cut-off", write: func(l *coordinationv1.Lease) {
			CutOff(l, fencingv1.ReasonPodCannotRun)
			WriteGrant(l, grantA, nil)
		}, want: StateGranted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := fresh()
			tc.write(l)
			rec := Read(l)
			got := rec.State("invoices", "a", "uid-a", 3)
			if tc.asIdle {
				got = rec.State("invoices", "", "", 0)
			}
			if got != tc.want {
				t.Fatalf("state %s, want %s", got, tc.want)
			}
			if rec.CutOffReason != tc.reason {
				t.Fatalf("cut-off reason %q, want %q", rec.CutOffReason, tc.reason)
			}
			if rec.Token != 3 {
				t.Fatalf("token %d: every step keeps the high-water token", rec.Token)
			}
		})
	}
}

// Rewriting a grant the Lease shows keeps the holder's times; one it does not show yet
// goes back to its last renewal known, never to a renewal of its own.
func TestWriteGrantNeverInventsARenewal(t *testing.T) {
	g := Grant{Holder: "a", HolderUID: "uid-a", Token: 3, AcquireTime: t0, DurationSeconds: 15, Successor: "b"}
	l := granted()
	Renew(l, t0.Add(2*time.Second))
	renewed := l.Spec.RenewTime.DeepCopy()
	WriteGrant(l, g, nil)
	if !l.Spec.RenewTime.Equal(renewed) || Read(l).Successor != "b" {
		t.Fatalf("a shown grant rewritten: renewTime %v (want the holder's %v), successor %q", l.Spec.RenewTime, renewed, Read(l).Successor)
	}
	g.Successor = ""
	if WriteGrant(l, g, nil); Read(l).Successor != "" {
		t.Fatalf("the hand-off request stayed after it was withdrawn")
	}

	// Someone rewrote the Lease (another pod named): the repair goes back to the last renewal seen.
	other := granted()
	other.Spec.HolderIdentity = &[]string{"x"}[0]
	last := metav1.NewMicroTime(t0.Add(time.Second))
	WriteGrant(other, g, &last)
	if !other.Spec.RenewTime.Equal(&last) || !other.Spec.AcquireTime.Equal(&t0) {
		t.Fatalf("repair wrote acquire %v renew %v, want %v and %v", other.Spec.AcquireTime, other.Spec.RenewTime, t0, last)
	}
	// Without one, it is not renewed at all.
	other = granted()
	other.Annotations[fencingv1.HolderUIDAnnotation] = "uid-x"
	other.Spec.RenewTime = &last
	WriteGrant(other, g, nil)
	if Read(other).Renewed() {
		t.Fatalf("a grant written over another pod's counts as renewed: renewTime %v", other.Spec.RenewTime)
	}
}

// Own reports a new token, so the caller counts the transition once.
func TestOwnSaysWhenTheTokenChanges(t *testing.T) {
	l := granted()
	if Own(l, "invoices", 3) {
		t.Fatal("token 3 over token 3 counted as a change")
	}
	if !Own(l, "invoices", 4) || ParseToken(l.Annotations) != 4 {
		t.Fatalf("token 4 over 3: not counted, or not written (%v)", l.Annotations)
	}
}
