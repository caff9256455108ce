// Command mysql-invoices is a worked example: a singleton job that writes the day's
// invoice run into MySQL or MariaDB, fenced by the token of its FencedLease grant. Run it
// in a labeled pod (Cold: FENCING_TOKEN is in its environment; Warm: it waits for the
// grant). The token check and the job's rows are one transaction: a holder that paused
// past its lease and wakes after its successor committed gets fence.ErrStaleToken, and
// its rows roll back with the check.
//
// MYSQL_DSN is a go-sql-driver/mysql DSN; give it readTimeout and writeTimeout (say
// "...?readTimeout=5s&writeTimeout=5s"): the driver's Commit ignores the context, and
// would wait on a server that stopped answering until they run out.
package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/fencedlease/fencedlease/pkg/fence"
	"github.com/fencedlease/fencedlease/pkg/holder"
)

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "mysql-invoices:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(ctrl.GetConfigOrDie())
	if err != nil {
		return err
	}
	cfg, err := holder.Config{Leases: holder.ClientGo(cs.CoordinationV1())}.NamesFromEnv()
	if err != nil {
		return err
	}
	h, err := holder.StartWhenGranted(ctx, cfg) // at once in a Cold pod: it was granted before it started
	if err != nil {
		return err
	}
	defer func() { _ = h.Release(context.Background()) }()

	db, err := sql.Open("mysql", os.Getenv("MYSQL_DSN"))
	if err != nil {
		return err
	}
	defer db.Close()
	f := &fence.SQL{Dialect: fence.MySQL}
	if err := f.CreateTable(ctx, db); err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS invoice_runs (
		day DATE NOT NULL, token BIGINT NOT NULL, created TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP)`); err != nil {
		return err
	}

	write, cancel := context.WithDeadline(h.Context(), h.Deadline())
	defer cancel()
	err = invoiceRun(write, db, f, h.Token(), time.Now().UTC())
	if errors.Is(err, fence.ErrStaleToken) {
		return fmt.Errorf("a newer holder ran first; this one stops: %w", err)
	}
	return err
}

// invoiceRun records the day's run, in the transaction that checks the token.
func invoiceRun(ctx context.Context, db *sql.DB, f *fence.SQL, token int64, now time.Time) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := f.Accept(ctx, tx, "invoice-runs", token); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO invoice_runs (day, token) VALUES (?, ?)`, now.Format("2006-01-02"), token); err != nil {
		return err
	}
	return tx.Commit()
}
