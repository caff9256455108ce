package plugin

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// A PodCannotStart revocation says what the pod reported.
func TestStatusTextShowsWhyAPodCouldNotStart(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	st := &Status{Namespace: "ns", Name: "invoices", Ready: "False", now: now, LastRevocation: &fencingv1.Revocation{
		PodName: "bad", Token: 1, Reason: fencingv1.ReasonPodCannotStart,
		Message: "container work: ImagePullBackOff: Back-off pulling image", Time: metav1.NewMicroTime(now.Add(-3 * time.Second))}}
	var out strings.Builder
	if err := st.text(&out); err != nil {
		t.Fatal(err)
	}
	if want := "bad, token 1, PodCannotStart (container work: ImagePullBackOff: Back-off pulling image), 3s ago"; !strings.Contains(out.String(), want) {
		t.Fatalf("status text lacks %q:\n%s", want, out.String())
	}
}

// A FencedLease with slots lists them: who holds which, renewed when, which one drains.
func TestStatusTextListsTheSlots(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	since := metav1.Duration{Duration: 2 * time.Second}
	st := &Status{Namespace: "ns", Name: "invoices", Ready: "True", now: now, Holding: "2/2", FencingToken: 9, Slots: []SlotStatus{
		{Slot: 0, Holder: &HolderStatus{Pod: "a", Token: 7, AcquireTime: now.Add(-time.Minute), SinceRenewal: &since}},
		{Slot: 1, LastRevocation: &fencingv1.Revocation{PodName: "b", Token: 8, Reason: fencingv1.ReasonLeaseExpired, Time: metav1.NewMicroTime(now.Add(-5 * time.Second))}},
		{Slot: 2, Holder: &HolderStatus{Pod: "c", Token: 9, AcquireTime: now.Add(-time.Hour)},
			Handoff: &fencingv1.Handoff{SuccessorName: fencingv1.SlotRemovedSuccessor, GracePeriodSeconds: 30}},
	}}
	var out strings.Builder
	if err := st.text(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Slots:        2/2 held", "0     a       7      1m0s ago  2s ago", "1     -       -",
		"last revoked: b, token 8, LeaseExpired, 5s ago", "2     c       9      1h0m ago  not yet  asked to hand off to (slot removed), grace 30s"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("status text lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "Holder:") {
		t.Fatalf("a FencedLease with slots has no single holder line:\n%s", out.String())
	}
}
