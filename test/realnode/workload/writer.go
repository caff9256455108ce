package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/fencedlease/fencedlease/pkg/fence"
)

// writes is the table the writer fills: one row per accepted write, in commit order.
const writesTable = `CREATE TABLE IF NOT EXISTS writes (
	id BIGSERIAL PRIMARY KEY, token BIGINT NOT NULL, pod TEXT NOT NULL, at TIMESTAMPTZ NOT NULL DEFAULT now())`

// write runs with LEDGER_DSN set: every 200 ms, while may says the grant holds, it
// writes a row under its token through the SQL fence (resource "realnode"), bounded by
// the grant's local deadline, and prints each outcome; WRITE_ALWAYS=1 makes a workload
// that never checks, for the fence to stop.
func write(dsn, pod string, may grantCheck, stop <-chan struct{}) {
	token, _ := strconv.ParseInt(os.Getenv("FENCING_TOKEN"), 10, 64)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		fmt.Println("write:", err)
		return
	}
	defer db.Close()
	f := &fence.SQL{Dialect: fence.Postgres}
	ctx := context.Background()
	for _, ddl := range []string{writesTable} {
		if _, err := db.ExecContext(ctx, ddl); err != nil {
			fmt.Println("write:", err)
		}
	}
	_ = f.CreateTable(ctx, db)
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
		err := writeOnce(ctx, db, f, token, pod, until)
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

func writeOnce(ctx context.Context, db *sql.DB, f *fence.SQL, token int64, pod string, until time.Time) error {
	ctx, cancel := context.WithDeadline(ctx, until)
	defer cancel()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if err := f.Accept(ctx, tx, "realnode", token); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO writes (token, pod) VALUES ($1, $2)`, token, pod); err != nil {
		return err
	}
	return tx.Commit()
}
