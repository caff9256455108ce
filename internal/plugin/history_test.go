package plugin

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/internal/eventnote"
)

// A transition is one event on the FencedLease; the history tells both of its halves —
// the grant that ended, then the next — each with its own pod, and takes nothing twice
// from the status.
func TestTheHistorySplitsATransitionIntoItsEndAndItsGrant(t *testing.T) {
	at := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	fl := &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "invoices", UID: "fl"},
		Status: fencingv1.FencedLeaseStatus{FencingToken: 3,
			Holder:         &fencingv1.Holder{PodName: "c", PodUID: "uid-c", Token: 3, AcquireTime: metav1.NewMicroTime(at.Add(2 * time.Second))},
			LastRevocation: &fencingv1.Revocation{PodName: "a", Token: 1, Reason: fencingv1.ReasonLeaseExpired, Time: metav1.NewMicroTime(at.Add(time.Second))}}}
	event := func(after time.Duration, kind, reason, pod, note string) corev1.Event {
		return corev1.Event{InvolvedObject: corev1.ObjectReference{Kind: "FencedLease", Name: "invoices", UID: "fl"},
			Related: &corev1.ObjectReference{Kind: "Pod", Name: pod}, Type: kind, Reason: reason, Message: note,
			EventTime: metav1.NewMicroTime(at.Add(after))}
	}
	revokedA := eventnote.Revoked(1, "a", "LeaseExpired")
	releasedB := eventnote.Released(2, "b", "PodFinished")
	events := []corev1.Event{
		event(2*time.Second, corev1.EventTypeNormal, "Released", "b", eventnote.Transition(releasedB, 3, "c")),
		event(0, corev1.EventTypeNormal, "Granted", "a", eventnote.Granted(1, "a")),
		event(time.Second, corev1.EventTypeWarning, "Revoked", "a", eventnote.Transition(revokedA, 2, "b")),
	}
	h := historyOf(fl, events, at.Add(time.Minute))
	var story []string
	for _, e := range h.Entries {
		story = append(story, e.Reason+" "+e.Pod+" ("+e.Source+"): "+e.Message)
	}
	want := []string{
		"Granted a (event): granted token 1 to pod a",
		"Revoked a (event): " + revokedA,
		"Granted b (event): granted token 2 to pod b",
		"Released b (event): " + releasedB,
		"Granted c (event): granted token 3 to pod c",
	}
	if got := strings.Join(story, "\n"); got != strings.Join(want, "\n") {
		t.Fatalf("history:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
	if e := h.Entries[2]; e.Type != corev1.EventTypeNormal || !e.Time.Equal(at.Add(time.Second)) {
		t.Errorf("b's grant: type %s at %v, want Normal at the transition's time", e.Type, e.Time)
	}
}
