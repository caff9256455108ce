package agent

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	clocktesting "k8s.io/utils/clock/testing"
)

// The state file carries the slot in a FencedLease with slots, and no slot key without.
func TestStateFileCarriesTheSlotOfAFencedLeaseWithSlots(t *testing.T) {
	c := clocktesting.NewFakeClock(time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC))
	dir := t.TempDir()
	single := newStateBoard(filepath.Join(dir, "single"), 7, c, logr.Discard())
	single.renewed(7, c.Now().Add(time.Second))
	raw, err := os.ReadFile(filepath.Join(dir, "single"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), `"slot"`) {
		t.Fatalf("a FencedLease without slots: no slot in the state file: %s", raw)
	}

	sharded := newStateBoard(filepath.Join(dir, "sharded"), 0, c, logr.Discard())
	sharded.setSlot(2)
	sharded.set(StateStarting, 9, nil, "")
	sharded.renewed(9, c.Now().Add(time.Second))
	raw, err = os.ReadFile(filepath.Join(dir, "sharded"))
	if err != nil {
		t.Fatal(err)
	}
	var st State
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatal(err)
	}
	if st.Slot == nil || *st.Slot != 2 || st.Token != 9 || st.State != StateHolding {
		t.Fatalf("state file %s", raw)
	}
}
