package fencedlease

import "errors"

// The slots of a pass write at once, but the tokens they grant land in token order: each
// after the one below it landed, so a failure or a crash never leaves a token no grant
// carries below one a Lease carries. A grant whose first record is the status write
// (recorded at once: by a restarted process, say) lands with that one write, after every
// grant made on a Lease in the pass; the slots judged after it grant no one in the pass.

// grantTurn is one slot's place among the slots of a pass that grant on their Lease.
type grantTurn struct {
	prev <-chan bool // the grant below: true once it landed; nil for the first
	done chan bool
	told bool
}

// errGrantBelowFailed ends a slot's writes when the grant below its own did not land; the
// pass reports that one's error.
var errGrantBelowFailed = errors.New("a lower token's grant did not land")

// wait is true once the grant below landed (at once for the first).
func (t *grantTurn) wait() bool {
	if t.prev == nil {
		return true
	}
	ok := <-t.prev
	t.prev = nil
	return ok
}

// tell says, once, whether this slot's grant landed.
func (t *grantTurn) tell(landed bool) {
	if !t.told {
		t.told = true
		t.done <- landed
	}
}
