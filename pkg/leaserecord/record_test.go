package leaserecord

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

var t0 = metav1.NewMicroTime(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))

// granted is the Lease as the operator's grant writes it: pod a, token 3, not renewed.
func granted() *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "invoices",
			Labels:      map[string]string{fencingv1.LeaseLabel: "invoices"},
			Annotations: map[string]string{fencingv1.TokenAnnotation: "3", fencingv1.HolderUIDAnnotation: "uid-a"}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("a"), AcquireTime: t0.DeepCopy(), RenewTime: t0.DeepCopy(),
			LeaseDurationSeconds: ptr.To[int32](15)},
	}
}

func TestEveryStateOfTheLease(t *testing.T) {
	renewed := func(l *coordinationv1.Lease) { l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(t0.Add(time.Second))) }
	for _, tc := range []struct {
		name    string
		mod     func(*coordinationv1.Lease)
		none    bool
		token   int64 // the status's grant; 0 for none
		want    State
		started bool
		renewed bool // GrantRenewed: the grant renewed, then possibly ended on the Lease
	}{
		{name: "no Lease", none: true, token: 3, want: StateNone},
		{name: "granted, not renewed", token: 3, want: StateGranted},
		{name: "renewed", mod: renewed, token: 3, want: StateRenewed, started: true, renewed: true},
		{name: "released by the holder", mod: func(l *coordinationv1.Lease) { renewed(l); l.Spec.HolderIdentity = nil }, token: 3, want: StateReleased, renewed: true},
		{name: "released before renewing", mod: func(l *coordinationv1.Lease) { l.Spec.HolderIdentity = nil }, token: 3, want: StateReleased},
		{name: "cut off by the operator", mod: func(l *coordinationv1.Lease) {
			renewed(l)
			l.Spec.HolderIdentity = nil
			delete(l.Annotations, fencingv1.HolderUIDAnnotation)
		}, token: 3, want: StateCutOff, renewed: true},
		{name: "a tombstone: no grant in the status", mod: func(l *coordinationv1.Lease) {
			l.Spec.HolderIdentity = nil
			delete(l.Annotations, fencingv1.HolderUIDAnnotation)
		}, want: StateTombstone},
		{name: "the Lease names an older grant", token: 4, want: StateOther},
		{name: "a pod of the same name and token, another UID", mod: func(l *coordinationv1.Lease) { l.Annotations[fencingv1.HolderUIDAnnotation] = "uid-b" },
			token: 3, want: StateOther},
		{name: "foreign: no label", mod: func(l *coordinationv1.Lease) { l.Labels = nil }, token: 3, want: StateForeign},
		{name: "foreign: another FencedLease's label", mod: func(l *coordinationv1.Lease) { l.Labels[fencingv1.LeaseLabel] = "other" }, token: 3, want: StateForeign},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := granted()
			if tc.mod != nil {
				tc.mod(l)
			}
			if tc.none {
				l = nil
			}
			r := Read(l)
			if got := r.State("invoices", "a", "uid-a", tc.token); got != tc.want {
				t.Fatalf("state %s, want %s", got, tc.want)
			}
			if got := r.Started("a", 3); got != tc.started {
				t.Fatalf("started = %v, want %v", got, tc.started)
			}
			if got := r.GrantRenewed("invoices", "a", "uid-a", tc.token); got != tc.renewed {
				t.Fatalf("grant renewed = %v, want %v", got, tc.renewed)
			}
		})
	}
}

func TestTheRecordReadsEveryField(t *testing.T) {
	l := granted()
	l.Annotations[fencingv1.SuccessorAnnotation] = "n"
	r := Read(l)
	if !r.Exists || r.Holder != "a" || r.HolderUID != "uid-a" || r.Token != 3 || r.DurationSeconds != 15 || r.Successor != "n" ||
		!r.Names("a", 3) || r.Names("a", 2) || r.Names("b", 3) || !r.Shows("a", "uid-a", 3) || r.Renewed() || r.Foreign("invoices") {
		t.Fatalf("misread: %+v", r)
	}
	if Read(nil).Exists || Read(nil).Foreign("invoices") || Read(nil).Cleared(0) {
		t.Fatal("no Lease reads as a Lease")
	}
}

func TestTokensParseStrictly(t *testing.T) {
	for raw, want := range map[string]int64{"": 0, "7": 7, "-1": 0, "x": 0, "9223372036854775807": 1<<63 - 1, "9223372036854775808": 0} {
		if got := ParseToken(map[string]string{fencingv1.TokenAnnotation: raw}); got != want {
			t.Errorf("ParseToken(%q) = %d, want %d", raw, got, want)
		}
	}
	if FormatToken(42) != "42" {
		t.Fatal("FormatToken")
	}
}
