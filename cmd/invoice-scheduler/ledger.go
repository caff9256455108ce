package main

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/fencedlease/fencedlease/pkg/fence"
)

// customers of the example tenant, charged once per billing period.
var customers = map[string]int64{"acme": 120_00, "globex": 75_50, "initech": 9_99}

type ledger struct {
	db    *sql.DB
	fence *fence.SQL
}

func openLedger(ctx context.Context, dsn string) (*ledger, error) {
	l := &ledger{fence: &fence.SQL{Dialect: fence.SQLite}}
	driver := "sqlite"
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		driver, l.fence.Dialect = "pgx", fence.Postgres
	} else {
		dsn = "file:" + dsn + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate"
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return nil, err
	}
	l.db = db
	if err := l.fence.CreateTable(ctx, db); err != nil {
		return nil, err
	}
	for _, ddl := range Schema {
		if _, err := db.ExecContext(ctx, ddl); err != nil {
			return nil, fmt.Errorf("creating the ledger: %w", err)
		}
	}
	return l, nil
}

// Schema is the ledger: one run per (tenant, period), one charge per customer and run.
var Schema = []string{
	`CREATE TABLE IF NOT EXISTS invoice_runs (
		tenant TEXT NOT NULL, period TEXT NOT NULL, token BIGINT NOT NULL, created_by TEXT NOT NULL,
		PRIMARY KEY (tenant, period))`,
	`CREATE TABLE IF NOT EXISTS charges (
		tenant TEXT NOT NULL, period TEXT NOT NULL, customer TEXT NOT NULL, amount_cents BIGINT NOT NULL,
		PRIMARY KEY (tenant, period, customer))`,
}

// createRun records the run and its charges under the fencing token, in one transaction:
// a stale token writes nothing; an existing run (a retry, or an earlier generation that
// finished) is left as it is and charges nothing twice. It reports whether it created
// the run.
func (l *ledger) createRun(ctx context.Context, tenant, period string, token int64, by string) (bool, error) {
	return l.createRunIn(ctx, "invoices/"+tenant, tenant, period, token, by)
}

// createRunIn is createRun fenced under resource: a shard's (fence.ForSlot), or the tenant's.
func (l *ledger) createRunIn(ctx context.Context, resource, tenant, period string, token int64, by string) (bool, error) {
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer func() { _ = tx.Rollback() }()
	if err := l.fence.Accept(ctx, tx, resource, token); err != nil {
		return false, err
	}
	res, err := tx.ExecContext(ctx, l.q(`INSERT INTO invoice_runs (tenant, period, token, created_by) VALUES ($1, $2, $3, $4)
		ON CONFLICT (tenant, period) DO NOTHING`), tenant, period, token, by)
	if err != nil {
		return false, err
	}
	created, err := res.RowsAffected()
	if err != nil {
		return false, err
	}
	for customer, cents := range customers {
		if _, err := tx.ExecContext(ctx, l.q(`INSERT INTO charges (tenant, period, customer, amount_cents) VALUES ($1, $2, $3, $4)
			ON CONFLICT (tenant, period, customer) DO NOTHING`), tenant, period, customer, cents); err != nil {
			return false, err
		}
	}
	return created == 1, tx.Commit()
}

// q writes PostgreSQL's $N placeholders as SQLite's ?N.
func (l *ledger) q(query string) string {
	if l.fence.Dialect == fence.SQLite {
		return strings.ReplaceAll(query, "$", "?")
	}
	return query
}
