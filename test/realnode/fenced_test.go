package realnode

import (
	"context"
	"database/sql"
	"slices"
	"strings"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/fencedlease/fencedlease/test/testenv"
)

// fencedDatabase starts a PostgreSQL server the pods reach, with a database name of its
// own, and returns its DSN and a connection the spec reads the accepted writes with.
func fencedDatabase(t *testing.T, name string) (string, *sql.DB) {
	t.Helper()
	_, dsn, db := fencedDatabaseServer(t, name)
	return dsn, db
}

// fencedDatabaseServer is fencedDatabase with the server, to stop and start it.
func fencedDatabaseServer(t *testing.T, name string) (*testenv.Postgres, string, *sql.DB) {
	t.Helper()
	pg := testenv.StartPostgresServer(t, "198.18.0.1")
	server := pg.DSN
	admin, err := sql.Open("pgx", server)
	must(t, err)
	defer admin.Close()
	_, err = admin.ExecContext(context.Background(), `CREATE DATABASE `+name)
	must(t, err)
	dsn := strings.Replace(server, "/postgres?", "/"+name+"?", 1)
	db, err := sql.Open("pgx", dsn)
	must(t, err)
	t.Cleanup(func() { db.Close() })
	return pg, dsn, db
}

// fencedWrites is the tokens of the writes the SQL fence accepted, in commit order; a
// token lower than one before it is a stale write the fence let through.
func fencedWrites(t *testing.T, db *sql.DB) []int64 {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), `SELECT token FROM writes ORDER BY id`)
	must(t, err)
	defer rows.Close()
	var tokens []int64
	for rows.Next() {
		var token int64
		must(t, rows.Scan(&token))
		if n := len(tokens); n > 0 && token < tokens[n-1] {
			t.Errorf("the fence accepted a write of token %d after one of token %d", token, tokens[n-1])
		}
		tokens = append(tokens, token)
	}
	must(t, rows.Err())
	return slices.Compact(tokens)
}
