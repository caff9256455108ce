package fence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
)

// Dialect is the SQL database behind a database/sql handle.
type Dialect int

const (
	// Postgres: PostgreSQL 9.5 or later, e.g. through the pgx stdlib driver.
	Postgres Dialect = iota
	// SQLite: SQLite 3.35 or later, e.g. modernc.org/sqlite. Open it with a busy timeout
	// and immediate transactions (_txlock=immediate) so writers queue instead of failing.
	SQLite
	// MySQL: MySQL 8 or MariaDB 10.5 or later with InnoDB, through
	// github.com/go-sql-driver/mysql. Any isolation level from READ COMMITTED up. Set
	// readTimeout and writeTimeout in the DSN: the driver's Commit ignores the context, and
	// waits on a server that stopped answering until they run out.
	MySQL
)

// DefaultTable holds one row per fenced resource: its highest accepted token.
const DefaultTable = "fencing_tokens"

// SQL fences writes to a SQL database.
type SQL struct {
	Dialect Dialect
	// Table defaults to DefaultTable.
	Table string
	// Metrics counts accepted and rejected writes; nil counts nothing.
	Metrics *Metrics
}

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func (f *SQL) table() (string, error) {
	t := f.Table
	if t == "" {
		t = DefaultTable
	}
	if !identifier.MatchString(t) {
		return "", fmt.Errorf("fence: table name %q is not a plain SQL identifier", t)
	}
	return t, nil
}

// CreateTable creates the token table if it does not exist.
func (f *SQL) CreateTable(ctx context.Context, db *sql.DB) error {
	t, err := f.table()
	if err != nil {
		return err
	}
	key := "TEXT"
	if f.Dialect == MySQL {
		key = "VARCHAR(255)" // an index on TEXT needs a length
	}
	_, err = db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+t+` (
		resource `+key+` PRIMARY KEY,
		token BIGINT NOT NULL CHECK (token >= 0)
	)`)
	return err
}

// Accept checks token against the highest one accepted for resource and records it,
// inside tx: call it in the same transaction as the write it protects, before that write,
// and roll back on error. It returns a *StaleTokenError when a higher token was accepted.
func (f *SQL) Accept(ctx context.Context, tx *sql.Tx, resource string, token int64) error {
	if token < 1 {
		return fmt.Errorf("fence: token %d is not a granted token", token)
	}
	t, err := f.table()
	if err != nil {
		return err
	}
	if f.Dialect == MySQL {
		return f.acceptMySQL(ctx, tx, t, resource, token)
	}
	p1, p2 := "$1", "$2"
	if f.Dialect == SQLite {
		p1, p2 = "?1", "?2"
	}
	// The conflicting row is locked and re-read before the WHERE is judged, so two
	// transactions cannot both pass the check against the same old value.
	var stored int64
	err = tx.QueryRowContext(ctx, `INSERT INTO `+t+` (resource, token) VALUES (`+p1+`, `+p2+`)
		ON CONFLICT (resource) DO UPDATE SET token = excluded.token
		WHERE `+t+`.token <= excluded.token
		RETURNING token`, resource, token).Scan(&stored)
	switch {
	case err == nil:
		f.Metrics.Count(resource, true)
		return nil
	case !errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("fence: recording token for %q: %w", resource, err)
	}
	if err := tx.QueryRowContext(ctx, `SELECT token FROM `+t+` WHERE resource = `+p1, resource).Scan(&stored); err != nil {
		return fmt.Errorf("fence: reading token for %q: %w", resource, err)
	}
	f.Metrics.Count(resource, false)
	return &StaleTokenError{Resource: resource, Offered: token, Stored: stored}
}

// acceptMySQL is Accept in MySQL's dialect, which has no RETURNING: the upsert keeps the
// larger token and locks the row (InnoDB locks the duplicate key it updates, even when
// the value stays), so the locking read that follows sees the row as this transaction
// left it, and no other writer can change it before commit.
func (f *SQL) acceptMySQL(ctx context.Context, tx *sql.Tx, t, resource string, token int64) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO `+t+` (resource, token) VALUES (?, ?)
		ON DUPLICATE KEY UPDATE token = IF(token <= VALUES(token), VALUES(token), token)`, resource, token); err != nil {
		return fmt.Errorf("fence: recording token for %q: %w", resource, err)
	}
	var stored int64
	// FOR UPDATE: a locking read sees the latest version; a plain one could see the
	// snapshot of an earlier read in this transaction, older than the row now is.
	if err := tx.QueryRowContext(ctx, `SELECT token FROM `+t+` WHERE resource = ? FOR UPDATE`, resource).Scan(&stored); err != nil {
		return fmt.Errorf("fence: reading token for %q: %w", resource, err)
	}
	if stored == token {
		f.Metrics.Count(resource, true)
		return nil
	}
	f.Metrics.Count(resource, false)
	return &StaleTokenError{Resource: resource, Offered: token, Stored: stored}
}
