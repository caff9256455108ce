package fence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/prometheus/client_golang/prometheus"
	_ "modernc.org/sqlite"

	"github.com/fencedlease/fencedlease/pkg/fence"
	"github.com/fencedlease/fencedlease/test/testenv"
)

func openPostgres(t *testing.T) *sql.DB {
	db, err := sql.Open("pgx", testenv.StartPostgres(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func openSQLite(t *testing.T) *sql.DB {
	dsn := "file:" + filepath.Join(t.TempDir(), "ledger.db") + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// openMariaDB starts a MariaDB server, creates database fence and opens it.
func openMariaDB(t *testing.T) *sql.DB {
	db, _ := startMariaDB(t)
	return db
}

func startMariaDB(t *testing.T) (*sql.DB, *testenv.MariaDB) {
	t.Helper()
	m := testenv.StartMariaDB(t)
	admin, err := sql.Open("mysql", m.DSN(""))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	waitSQL(t, admin)
	if _, err := admin.Exec("CREATE DATABASE IF NOT EXISTS fence"); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("mysql", m.DSN("fence"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, m
}

// waitSQL waits until db answers.
func waitSQL(t *testing.T, db *sql.DB) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := db.PingContext(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the database does not answer: %v", err)
		}
	}
}

func TestSQL(t *testing.T) {
	for _, tc := range []struct {
		name    string
		dialect fence.Dialect
		open    func(*testing.T) *sql.DB
		serial  string
	}{
		{"PostgreSQL", fence.Postgres, openPostgres, "BIGSERIAL PRIMARY KEY"},
		{"SQLite", fence.SQLite, openSQLite, "INTEGER PRIMARY KEY AUTOINCREMENT"},
		{"MariaDB", fence.MySQL, openMariaDB, "BIGINT AUTO_INCREMENT PRIMARY KEY"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := tc.open(t)
			t.Run("accepts equal and higher tokens, rejects lower ones", func(t *testing.T) {
				semantics(t, db, tc.dialect)
			})
			t.Run("concurrent writers in random token order", func(t *testing.T) {
				concurrent(t, db, tc.dialect, tc.serial)
			})
		})
	}
}

func semantics(t *testing.T, db *sql.DB, d fence.Dialect) {
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	f := &fence.SQL{Dialect: d, Table: "tokens_semantics", Metrics: fence.NewMetrics(reg)}
	if err := f.CreateTable(ctx, db); err != nil {
		t.Fatal(err)
	}
	if err := f.CreateTable(ctx, db); err != nil {
		t.Fatalf("CreateTable is not idempotent: %v", err)
	}
	accept := func(resource string, token int64) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Accept(ctx, tx, resource, token); err != nil {
			_ = tx.Rollback()
			return err
		}
		return tx.Commit()
	}
	for _, step := range []struct {
		resource string
		token    int64
		stale    bool
	}{
		{"invoices/tenant-7", 81, false},
		{"invoices/tenant-7", 81, false}, // a retry within the generation
		{"invoices/tenant-7", 82, false},
		{"invoices/tenant-7", 81, true}, // the paused client resumes
		{"invoices/tenant-8", 1, false}, // resources are independent
		{"invoices/tenant-7", 90, false},
	} {
		err := accept(step.resource, step.token)
		var stale *fence.StaleTokenError
		switch {
		case step.stale && !errors.As(err, &stale):
			t.Fatalf("%s token %d: want a stale-token error, got %v", step.resource, step.token, err)
		case step.stale:
			if stale.Offered != 81 || stale.Stored != 82 || !errors.Is(err, fence.ErrStaleToken) {
				t.Fatalf("error = %+v", stale)
			}
			want := `stale fencing token for "invoices/tenant-7": offered 81, but 82 was already accepted`
			if err.Error() != want {
				t.Fatalf("message %q, want %q", err, want)
			}
		case err != nil:
			t.Fatalf("%s token %d: %v", step.resource, step.token, err)
		}
	}
	// Fenced per slot (the shards of a FencedLease with slots): slot 0's holder (token 4)
	// still writes after slot 1's (token 5) did; only an older holder of its slot is refused.
	for _, step := range []struct {
		slot  int32
		token int64
		stale bool
	}{{1, 5, false}, {0, 4, false}, {0, 6, false}, {0, 4, true}, {1, 5, false}} {
		err := accept(fence.ForSlot("invoices/tenant-9", step.slot), step.token)
		if stale := errors.Is(err, fence.ErrStaleToken); stale != step.stale || err != nil && !stale {
			t.Fatalf("slot %d token %d: %v (stale wanted: %v)", step.slot, step.token, err, step.stale)
		}
	}
	tx, _ := db.BeginTx(ctx, nil)
	defer tx.Rollback()
	if err := f.Accept(ctx, tx, "x", 0); err == nil {
		t.Fatal("token 0 accepted")
	}
	if got := testenv.FenceWrites(reg, "invoices/tenant-7", "stale"); got != 1 {
		t.Fatalf("stale writes counted: %v", got)
	}
	if got := testenv.FenceWrites(reg, "invoices/tenant-7", "accepted"); got != 4 {
		t.Fatalf("accepted writes counted: %v", got)
	}
	if bad := (&fence.SQL{Dialect: d, Table: "x; DROP TABLE y"}); bad.CreateTable(ctx, db) == nil {
		t.Fatal("an unsafe table name was accepted")
	}
}

// concurrent has many writers race with random tokens: the stored token never goes
// down, no write with a lower token commits, and the business rows are exactly the
// accepted writes.
func concurrent(t *testing.T, db *sql.DB, d fence.Dialect, serial string) {
	ctx := context.Background()
	f := &fence.SQL{Dialect: d, Table: "tokens_concurrent"}
	if err := f.CreateTable(ctx, db); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE runs (seq `+serial+`, writer INT NOT NULL, n INT NOT NULL, token BIGINT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	insert := "INSERT INTO runs (writer, n, token) VALUES ($1, $2, $3)"
	switch d {
	case fence.SQLite:
		insert = "INSERT INTO runs (writer, n, token) VALUES (?1, ?2, ?3)"
	case fence.MySQL:
		insert = "INSERT INTO runs (writer, n, token) VALUES (?, ?, ?)"
	}
	const writers, each = 8, 40
	var mu sync.Mutex
	committed := map[string]int64{}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for n := range each {
				// Generations rise, but writers interleave out of order around them.
				token := 1 + int64(n) + rng.Int64N(8)
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					t.Error(err)
					return
				}
				err = f.Accept(ctx, tx, "invoices/tenant-7", token)
				if errors.Is(err, fence.ErrStaleToken) {
					_ = tx.Rollback()
					continue
				}
				if err == nil {
					_, err = tx.ExecContext(ctx, insert, w, n, token)
				}
				if err != nil {
					_ = tx.Rollback()
					t.Error(err)
					return
				}
				if err := tx.Commit(); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				committed[fmt.Sprint(w, "/", n)] = token
				mu.Unlock()
			}
		})
	}
	wg.Wait()

	// The fence row is locked from Accept to commit, so the business rows' seq (taken
	// under that lock) is the commit order: tokens must never go down along it.
	rows, err := db.QueryContext(ctx, `SELECT writer, n, token FROM runs ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var last, maxToken int64
	seen := 0
	for rows.Next() {
		var w, n int
		var token int64
		if err := rows.Scan(&w, &n, &token); err != nil {
			t.Fatal(err)
		}
		if token < last {
			t.Fatalf("write %d/%d committed token %d after token %d", w, n, token, last)
		}
		if want, ok := committed[fmt.Sprint(w, "/", n)]; !ok || want != token {
			t.Fatalf("business row %d/%d (token %d) is not an accepted write", w, n, token)
		}
		last, maxToken = token, max(maxToken, token)
		seen++
	}
	if seen != len(committed) {
		t.Fatalf("%d business rows for %d accepted writes", seen, len(committed))
	}
	var stored int64
	if err := db.QueryRowContext(ctx, `SELECT token FROM tokens_concurrent WHERE resource = 'invoices/tenant-7'`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != maxToken {
		t.Fatalf("stored token %d, highest accepted %d", stored, maxToken)
	}
	t.Logf("%d of %d writes accepted, final token %d", len(committed), writers*each, stored)
	if len(committed) < writers || writers*each-len(committed) < writers {
		t.Fatalf("the race did not exercise both outcomes: %d accepted", len(committed))
	}
}

// The seed's story against MariaDB, across a paused and a crashed server: token 1 writes,
// token 2 writes, token 1's late write is refused and its business row rolled back.
func TestSQLOnMariaDBAcrossAPauseAndACrash(t *testing.T) {
	db, m := startMariaDB(t)
	ctx := context.Background()
	f := &fence.SQL{Dialect: fence.MySQL}
	if err := f.CreateTable(ctx, db); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE reports (token BIGINT NOT NULL, body TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	write := func(ctx context.Context, token int64) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if err := f.Accept(ctx, tx, "reports", token); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO reports (token, body) VALUES (?, ?)`, token, fmt.Sprint("from token ", token)); err != nil {
			return err
		}
		return tx.Commit()
	}
	rows := func() int {
		var n int
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM reports`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, token := range []int64{1, 2} {
		if err := write(ctx, token); err != nil {
			t.Fatalf("token %d: %v", token, err)
		}
	}
	if err := write(ctx, 1); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("token 1 after 2: %v, want ErrStaleToken", err)
	}
	if n := rows(); n != 2 {
		t.Fatalf("%d report rows, want 2: the refused write's row must roll back", n)
	}

	m.Pause()
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	err := write(short, 3)
	cancel()
	m.Resume()
	if err == nil || errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("a write to a paused server: %v, want a plain error", err)
	}
	waitSQL(t, db)

	m.Restart()
	waitSQL(t, db)
	if err := write(ctx, 1); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("token 1 after a crash and restart: %v, want ErrStaleToken", err)
	}
	if err := write(ctx, 4); err != nil {
		t.Fatalf("token 4 after the restart: %v", err)
	}
}

// A transaction that read the token table before Accept (a snapshot, under MariaDB's
// REPEATABLE READ) still sees the latest token: Accept's read locks and reads current.
func TestSQLOnMariaDBIgnoresAnEarlierSnapshot(t *testing.T) {
	db := openMariaDB(t)
	ctx := context.Background()
	f := &fence.SQL{Dialect: fence.MySQL}
	if err := f.CreateTable(ctx, db); err != nil {
		t.Fatal(err)
	}
	accept := func(tx *sql.Tx, token int64) error { return f.Accept(ctx, tx, "r", token) }
	tx, _ := db.BeginTx(ctx, nil)
	if err := accept(tx, 3); err != nil {
		t.Fatal(err)
	}
	_ = tx.Commit()

	old, _ := db.BeginTx(ctx, nil) // the paused holder's transaction: its snapshot shows 3
	defer old.Rollback()
	var seen int64
	if err := old.QueryRowContext(ctx, `SELECT token FROM fencing_tokens WHERE resource = 'r'`).Scan(&seen); err != nil || seen != 3 {
		t.Fatalf("snapshot read %d, %v", seen, err)
	}
	newer, _ := db.BeginTx(ctx, nil) // its successor commits 5 meanwhile
	if err := accept(newer, 5); err != nil {
		t.Fatal(err)
	}
	_ = newer.Commit()
	if err := accept(old, 3); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("token 3 after 5 committed, in a transaction whose snapshot shows 3: %v, want ErrStaleToken", err)
	}
}
