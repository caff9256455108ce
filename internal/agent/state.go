package agent

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
)

// The agent's states, as State.State.
const (
	StateWaiting  = "Waiting"  // a Warm standby: not granted yet; the token is 0 until it is
	StateStarting = "Starting" // confirming the grant with a first renewal
	StateHolding  = "Holding"
	StateDraining = "Draining" // asked to hand off: release at a safe point
	StateLost     = "Lost"     // no renewal confirmed before the deadline: stop; the agent keeps trying
	StateEnded    = "Ended"    // the grant moved on or was released: nothing left to renew
)

// State is the agent's local view of the grant, for the workload: written to a file
// (JSON, replaced atomically) and served on the agent's localhost endpoint. It is the
// agent's own knowledge, so it stays current while the API server is unreachable, which
// /etc/fencing/state (the kubelet copies it from the API server) does not.
type State struct {
	State string `json:"state"`
	Token int64  `json:"token"`
	// Slot is the slot granted, in a FencedLease with slots (absent otherwise).
	Slot *int32 `json:"slot,omitempty"`
	// Deadline, while Holding or Draining, is when the agent gives up unless a renewal is
	// confirmed, on this node's clock: start no work that cannot finish before it.
	Deadline *time.Time `json:"deadline,omitempty"`
	// Reason says why the state is Lost or Ended.
	Reason string `json:"reason,omitempty"`
	// Updated is when the agent wrote this.
	Updated time.Time `json:"updated"`
}

// stateBoard holds the current State and publishes each change.
type stateBoard struct {
	mu    sync.Mutex
	cur   State
	slot  *int32 // the slot granted, once known, in a FencedLease with slots
	path  string // "" writes no file
	clock clock.PassiveClock
	log   logr.Logger
}

func newStateBoard(path string, token int64, c clock.PassiveClock, log logr.Logger) *stateBoard {
	b := &stateBoard{path: path, clock: c, log: log}
	if path != "" {
		if _, err := os.Stat(filepath.Dir(path)); err != nil {
			log.Info("no folder for the state file; the workload can read the state on the endpoint only", "path", path, "error", err.Error())
			b.path = ""
		}
	}
	if token == 0 {
		b.set(StateWaiting, 0, nil, "")
	} else {
		b.set(StateStarting, token, nil, "")
	}
	return b
}

// set publishes a state; a nil deadline clears it.
func (b *stateBoard) set(state string, token int64, deadline *time.Time, reason string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.cur = State{State: state, Token: token, Slot: b.slot, Deadline: deadline, Reason: reason, Updated: b.clock.Now()}
	if b.path == "" {
		return
	}
	raw, _ := json.Marshal(b.cur)
	tmp := b.path + ".tmp"
	if err := os.WriteFile(tmp, append(raw, '\n'), 0o644); err != nil {
		b.log.Error(err, "writing the state file", "path", b.path)
		return
	}
	if err := os.Rename(tmp, b.path); err != nil {
		b.log.Error(err, "writing the state file", "path", b.path)
	}
}

// setSlot records the slot granted; the next state published carries it.
func (b *stateBoard) setSlot(slot int32) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.slot = &slot
}

// renewed moves the deadline, keeping Draining once asked.
func (b *stateBoard) renewed(token int64, deadline time.Time) {
	b.mu.Lock()
	state := b.cur.State
	b.mu.Unlock()
	if state != StateDraining {
		state = StateHolding
	}
	b.set(state, token, &deadline, "")
}

func (b *stateBoard) get() State {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cur
}

// ServeHTTP answers GET with the current state as JSON.
func (b *stateBoard) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(b.get())
}
