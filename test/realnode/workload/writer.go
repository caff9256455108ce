package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strconv"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/fencedlease/fencedlease/pkg/fence"
)

// writes is the table the writer fills: one row per accepted write, in commit order.
const writesTable = `CREATE TABLE IF NOT EXISTS writes (
	id BIGSERIAL PRIMARY KEY, token BIGINT NOT NULL, pod TEXT NOT NULL, at TIMESTAMPTZ NOT NULL DEFAULT now())`

// startWriting runs with LEDGER_DSN set: it finds out how the workload holds its grant —
// the agent's state file, or with HOLDER=pkg its own Holder (waiting for the grant in a
// Warm pod) — and then writes.
func startWriting(dsn, pod string, stop <-chan struct{}) {
	token, _ := strconv.ParseInt(os.Getenv("FENCING_TOKEN"), 10, 64)
	zombie := isZombie(pod)
	may := func() (bool, time.Time) { return agentFile(time.Now()) }
	if os.Getenv("HOLDER") == "pkg" {
		var err error
		if may, token, err = ownHolder(context.Background(), zombie); err != nil {
			fmt.Println("holder:", err)
			os.Exit(1)
		}
	}
	write(dsn, pod, token, zombie, may, stop)
}

// isZombie: with ZOMBIE_ONE_IN=N, one pod in N (by its name's hash) ignores its Holder
// once granted, as a workload that never checks does.
func isZombie(pod string) bool {
	n, err := strconv.ParseUint(os.Getenv("ZOMBIE_ONE_IN"), 10, 32)
	if err != nil || n == 0 {
		return false
	}
	h := fnv.New32a()
	h.Write([]byte(pod))
	return h.Sum32()%uint32(n) == 0
}

// write: every 200 ms, while may says the grant holds, it writes a row under its token
// through the SQL fence (resource "realnode"), bounded by the grant's local deadline, and
// prints each outcome; WRITE_ALWAYS=1 makes a workload behind the agent that never
// checks, for the fence to stop. With WRITE_LOG (a folder) it also appends each outcome
// to WRITE_LOG/POD.jsonl, which outlives the pod.
func write(dsn, pod string, token int64, zombie bool, may grantCheck, stop <-chan struct{}) {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		fmt.Println("write:", err)
		return
	}
	defer db.Close()
	f := &fence.SQL{Dialect: fence.Postgres}
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, writesTable); err != nil {
		fmt.Println("write:", err)
	}
	_ = f.CreateTable(ctx, db)
	record := outcomeLog(pod, token, zombie)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	held := false
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		holding, until := may()
		if held && !holding {
			fmt.Printf("T=%d not holding: stopped writing\n", time.Now().UnixNano())
		}
		if held = holding; !holding {
			continue
		}
		row, err := writeOnce(ctx, db, f, token, pod, until)
		record(row, err)
		var stale *fence.StaleTokenError
		switch {
		case err == nil:
			fmt.Printf("T=%d wrote token %d\n", time.Now().UnixNano(), token)
		case errors.As(err, &stale):
			fmt.Printf("T=%d REJECTED token %d\n", time.Now().UnixNano(), token)
		default:
			fmt.Printf("T=%d write error: %v\n", time.Now().UnixNano(), err)
		}
	}
}

func writeOnce(ctx context.Context, db *sql.DB, f *fence.SQL, token int64, pod string, until time.Time) (int64, error) {
	ctx, cancel := context.WithDeadline(ctx, until)
	defer cancel()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }()
	if err := f.Accept(ctx, tx, "realnode", token); err != nil {
		return 0, err
	}
	var row int64
	if err := tx.QueryRowContext(ctx, `INSERT INTO writes (token, pod) VALUES ($1, $2) RETURNING id`, token, pod).Scan(&row); err != nil {
		return 0, err
	}
	return row, tx.Commit()
}

// Outcome is one line of a WRITE_LOG file: a write attempted, and what came of it.
type Outcome struct {
	At       time.Time `json:"at"`
	Pod      string    `json:"pod"`
	Token    int64     `json:"token"`
	Zombie   bool      `json:"zombie,omitempty"`
	Accepted bool      `json:"accepted,omitempty"`
	Row      int64     `json:"row,omitempty"`
	Stale    bool      `json:"stale,omitempty"` // refused by the fence
	Error    string    `json:"error,omitempty"` // failed otherwise
}

// outcomeLog returns what records each outcome in WRITE_LOG, or does nothing without it.
func outcomeLog(pod string, token int64, zombie bool) func(row int64, err error) {
	dir := os.Getenv("WRITE_LOG")
	if dir == "" {
		return func(int64, error) {}
	}
	file, err := os.OpenFile(filepath.Join(dir, pod+".jsonl"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Println("write log:", err)
		return func(int64, error) {}
	}
	enc := json.NewEncoder(file)
	return func(row int64, err error) {
		o := Outcome{At: time.Now(), Pod: pod, Token: token, Zombie: zombie, Accepted: err == nil, Row: row}
		var stale *fence.StaleTokenError
		switch {
		case errors.As(err, &stale):
			o.Stale = true
		case err != nil:
			o.Error = err.Error()
		}
		_ = enc.Encode(o)
	}
}
