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

func TestSQL(t *testing.T) {
	for _, tc := range []struct {
		name    string
		dialect fence.Dialect
		open    func(*testing.T) *sql.DB
		serial  string
	}{
		{"PostgreSQL", fence.Postgres, openPostgres, "BIGSERIAL PRIMARY KEY"},
		{"SQLite", fence.SQLite, openSQLite, "INTEGER PRIMARY KEY AUTOINCREMENT"},
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
	tx, _ := db.BeginTx(ctx, nil)
	defer tx.Rollback()
	if err := f.Accept(ctx, tx, "x", 0); err == nil {
		t.Fatal("token 0 accepted")
	}
	if got := counter(reg, "invoices/tenant-7", "stale"); got != 1 {
		t.Fatalf("stale writes counted: %v", got)
	}
	if got := counter(reg, "invoices/tenant-7", "accepted"); got != 4 {
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
	if d == fence.SQLite {
		insert = "INSERT INTO runs (writer, n, token) VALUES (?1, ?2, ?3)"
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

// counter is the value of fencedlease_fence_writes_total{resource,result}.
func counter(reg *prometheus.Registry, resource, result string) float64 {
	families, _ := reg.Gather()
	for _, f := range families {
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if f.GetName() == "fencedlease_fence_writes_total" && labels["resource"] == resource && labels["result"] == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
