package fencedlease

import (
	"k8s.io/utils/clock"

	"github.com/fencedlease/fencedlease/controllers/fencedlease/internal/decision"
)

// Memory is what this process observed of the holders — when it last saw each grant's
// renewal, the revocations it began, the lock-delays it started — kept across the
// candidacies of one process (leadership.Campaign), so a leader that campaigns again
// after an outage judges expiry from what it saw before instead of giving every holder a
// whole new lease. That is sound because it is one process's monotonic clock throughout,
// and an observation never grows stale into a wrong answer: a grant another leader
// changed in between is a different grant (a new UID or token), and a holder that renewed
// in between shows a different RenewTime, which counts as a renewal now. Only one
// candidacy's controller uses it at a time: the campaign starts the next once the last
// one's runnables have returned.
type Memory struct {
	grants *decision.GrantMemory
}

// NewMemory is an empty Memory on c, the clock the controller is given (Options.Clock).
func NewMemory(c clock.PassiveClock) *Memory { return &Memory{grants: decision.NewGrantMemory(c)} }
