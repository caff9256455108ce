package realnode

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fencedlease/fencedlease/test/chaos"
)

// chaosLedger is the fenced table, in commit order.
func chaosLedger(t *testing.T, db *sql.DB) []chaos.Row {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), `SELECT id, token FROM writes ORDER BY id`)
	must(t, err)
	defer rows.Close()
	var out []chaos.Row
	for rows.Next() {
		var r chaos.Row
		must(t, rows.Scan(&r.ID, &r.Token))
		out = append(out, r)
	}
	must(t, rows.Err())
	return out
}

// outcome is a line of the workload's WRITE_LOG (test/realnode/workload's Outcome).
type outcome struct {
	At       time.Time `json:"at"`
	Pod      string    `json:"pod"`
	Token    int64     `json:"token"`
	Zombie   bool      `json:"zombie"`
	Accepted bool      `json:"accepted"`
	Row      int64     `json:"row"`
	Stale    bool      `json:"stale"`
	Error    string    `json:"error"`
}

// chaosWrites is every write the writers logged. A row of the ledger no log tells of is
// a write its writer committed but was killed before it could log: allowed for the pods
// a fault killed, and returned (as "pod row N") so the report says so; any other such row
// stays out, for the checker to find.
func chaosWrites(t *testing.T, dir string, ledger []chaos.Row, db *sql.DB, killed *killedPods) ([]chaos.Write, []string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	must(t, err)
	var writes []chaos.Write
	logged := map[int64]bool{}
	for _, f := range files {
		file, err := os.Open(f)
		must(t, err)
		lines := bufio.NewScanner(file)
		for lines.Scan() {
			var o outcome
			if json.Unmarshal(lines.Bytes(), &o) != nil {
				continue // a line cut short by a kill
			}
			writes = append(writes, chaos.Write{Pod: o.Pod, Token: o.Token, Accepted: o.Accepted, Row: o.Row, Zombie: o.Zombie})
			if o.Accepted {
				logged[o.Row] = true
			}
		}
		file.Close()
	}
	var unlogged []string
	for _, r := range ledger {
		if logged[r.ID] {
			continue
		}
		var pod string
		must(t, db.QueryRowContext(context.Background(), `SELECT pod FROM writes WHERE id = $1`, r.ID).Scan(&pod))
		if killed.names[pod] {
			writes = append(writes, chaos.Write{Pod: pod, Token: r.Token, Accepted: true, Row: r.ID})
			unlogged = append(unlogged, fmt.Sprintf("%s row %d", pod, r.ID))
		}
	}
	return writes, unlogged
}

// chaosReport prints the run's table and adds its rows to the suite's report.
func chaosReport(t *testing.T, h chaos.History, unlogged []string) {
	injected := map[string]int{}
	for _, f := range h.Faults {
		injected[f.Kind]++
	}
	grants := 0
	for _, s := range h.States {
		if s.State == "Holding" {
			grants++
		}
	}
	var accepted, stale, zombieStale int
	for _, w := range h.Writes {
		switch {
		case w.Accepted:
			accepted++
		case w.Zombie:
			zombieStale++
			stale++
		default:
			stale++
		}
	}
	rec := chaos.HolderRecovery(h)
	var b strings.Builder
	fmt.Fprintf(&b, "| fault | injected | last renewal → successor at work p50 | max | bound |\n|---|---|---|---|---|\n")
	for _, f := range holderFaults {
		d := slices.Clone(rec[f.name])
		slices.Sort(d)
		p50, worst := "-", "-"
		if len(d) > 0 {
			p50, worst = d[(len(d)-1)/2].Round(10*time.Millisecond).String(), d[len(d)-1].Round(10*time.Millisecond).String()
		}
		bound := fmt.Sprintf("≤ %v", h.Lease+chaos.HolderMargin)
		if f.fate == chaos.GrantKept {
			p50, worst, bound = "kept", "kept", "not revoked"
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s |\n", f.name, injected[f.name], p50, worst, bound)
		measured("chaos: "+f.name, "%d injected, recovery p50 %s, max %s", injected[f.name], p50, worst)
	}
	v := chaos.Check(h)
	fmt.Fprintf(&b, "grants %d, revocations %d, writes logged or committed %d: accepted %d, refused or failed %d (by zombies %d); committed by a killed writer, unlogged: %v; violations %d\n",
		grants, len(h.Revocations), len(h.Writes), accepted, stale, zombieStale, unlogged, len(v))
	t.Log("\n" + b.String())
	measured("chaos: violations", "%d (grants %d, accepted writes %d, zombie writes refused or failed %d)", len(v), grants, accepted, zombieStale)
}
