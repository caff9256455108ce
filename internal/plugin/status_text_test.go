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
