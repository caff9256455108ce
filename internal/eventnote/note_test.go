package eventnote

import "testing"

// A transition's note splits back into exactly its halves, whatever the ended grant's
// detail says; any other note is not a transition.
func TestATransitionSplitsIntoTheGrantThatEndedAndTheNext(t *testing.T) {
	for _, ended := range []string{
		Revoked(1, "a", "LeaseExpired"),
		Revoked(7, "a", "PodCannotStart (container work: CrashLoopBackOff; then granted token 9 to pod x is not a grant)"),
		Released(3, "worker-0", "PodFinished"),
	} {
		note := Transition(ended, 8, "b-7f9c")
		got, token, pod, ok := SplitTransition(note)
		if !ok || got != ended || token != 8 || pod != "b-7f9c" {
			t.Errorf("SplitTransition(%q) = %q, %d, %q, %v; want %q, 8, b-7f9c, true", note, got, token, pod, ok, ended)
		}
	}
	for _, note := range []string{
		Granted(2, "b"),
		Revoked(1, "a", "LeaseExpired"),
		Revoked(1, "a", "LeaseExpired") + "; then granted token x to pod b",
		Revoked(1, "a", "LeaseExpired") + "; then granted token 2 to pod b and more",
	} {
		if _, _, _, ok := SplitTransition(note); ok {
			t.Errorf("SplitTransition(%q) took it for a transition", note)
		}
	}
}
