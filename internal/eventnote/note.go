// Package eventnote is the wording of the operator's events about grants: written by the
// controller, read back by `kubectl fencedlease history`, which splits a transition's one
// event into the grant that ended and the one that began.
package eventnote

import (
	"fmt"
	"strings"
)

// Granted is the note of a grant.
func Granted(token int64, pod string) string {
	return fmt.Sprintf("granted token %d to pod %s", token, pod)
}

// Revoked is the note of a revocation; detail is its reason and message.
func Revoked(token int64, pod, detail string) string {
	return fmt.Sprintf("revoked token %d of pod %s: %s", token, pod, detail)
}

// Released is the note of a release; reason says how the grant ended.
func Released(token int64, pod, reason string) string {
	return fmt.Sprintf("pod %s released token %d: %s", pod, token, reason)
}

// then joins the two halves of a transition's note.
const then = "; then "

// Transition is the note of the one event on the FencedLease for a grant that ends and
// the next that begins in the same write (a failover): ended (a Revoked or Released note),
// then the Granted note of token to pod.
func Transition(ended string, token int64, pod string) string {
	return ended + then + Granted(token, pod)
}

// SplitTransition takes a Transition note apart: the ended grant's note, and the token
// and pod of the grant that followed; ok is false for any other note.
func SplitTransition(note string) (ended string, token int64, pod string, ok bool) {
	i := strings.LastIndex(note, then+"granted token ")
	if i < 0 {
		return "", 0, "", false
	}
	granted := note[i+len(then):]
	if _, err := fmt.Sscanf(granted, "granted token %d to pod %s", &token, &pod); err != nil || Granted(token, pod) != granted {
		return "", 0, "", false
	}
	return note[:i], token, pod, true
}
