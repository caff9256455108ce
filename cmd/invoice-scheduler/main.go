// Command invoice-scheduler is the worked example: the singleton that creates the invoice
// run for one tenant and billing period. It runs in a pod opted into a FencedLease, renews
// its grant through pkg/holder, and writes under the fencing token and a unique key, so:
//
//   - a scheduler that resumes after its grant ended (a pause, a partition) has its write
//     rejected by the ledger (the fencing token), and
//   - a retry, or a second scheduler of a later generation, charges nothing twice (the
//     unique key on (tenant, period) and on each charge).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	"k8s.io/client-go/kubernetes"
	_ "modernc.org/sqlite"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/fencedlease/fencedlease/pkg/fence"
	"github.com/fencedlease/fencedlease/pkg/holder"
)

// Exit codes the demo reads.
const (
	exitStale = 3 // the ledger rejected the write: a newer generation had written
	exitLost  = 4 // the grant ended before the write was attempted
)

func main() {
	code, err := run()
	if err != nil {
		fmt.Fprintln(os.Stderr, "invoice-scheduler:", err)
	}
	os.Exit(code)
}

func run() (int, error) {
	tenant := flag.String("tenant", "tenant-7", "Tenant to invoice.")
	period := flag.String("period", "2026-11", "Billing period.")
	dsn := flag.String("dsn", "", "Ledger: a PostgreSQL URL (postgres://...) or a SQLite file path.")
	work := flag.Duration("work", time.Second, "Time spent computing the batch after the lease check, before the write.")
	tenants := flag.String("tenants", "", "In a FencedLease with slots: every tenant, comma-separated; each shard (slot) invoices those that hash to it.")
	shards := flag.Int("shards", 0, "In a FencedLease with slots: its spec.holders.")
	periods := flag.Int("periods", 1, "In a FencedLease with slots: billing periods to run, one after another (2026-01, 2026-02, …).")
	flag.Parse()

	ctx := ctrl.SetupSignalHandler()
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return 1, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return 1, err
	}
	hc, err := holder.Config{Leases: holder.ClientGo(cs.CoordinationV1())}.FromEnv()
	if err != nil {
		return 1, err
	}
	h, err := holder.Start(ctx, hc)
	if err != nil {
		return exitLost, fmt.Errorf("confirming the grant: %w", err)
	}
	defer func() { _ = h.Release(context.Background()) }()
	l, err := openLedger(ctx, *dsn)
	if err != nil {
		return 1, err
	}
	defer l.db.Close()
	if hc.Sharded {
		if *shards < 1 || *tenants == "" {
			return 1, errors.New("a FencedLease with slots (FENCING_SLOT is set) needs --shards and --tenants")
		}
		return runShard(ctx, h, l, hc.Identity, strings.Split(*tenants, ","), *shards, *periods, *work)
	}
	say("holding token %d; computing the invoice run for %s/%s", h.Token(), *tenant, *period)

	// The last moment the process knows its grant is valid. A pause after this check is
	// exactly what the lease cannot prevent and the fencing token can.
	if h.Context().Err() != nil {
		say("grant lost before writing (%v); not writing", h.Err())
		return exitLost, nil
	}
	say("grant valid; writing in %v", *work)
	time.Sleep(*work) // the batch computation

	created, err := l.createRun(ctx, *tenant, *period, h.Token(), hc.Identity)
	var stale *fence.StaleTokenError
	switch {
	case errors.As(err, &stale):
		say("REJECTED by the ledger: %v", stale)
		return exitStale, nil
	case err != nil:
		return 1, err
	case created:
		say("invoice run %s/%s created with token %d", *tenant, *period, h.Token())
	default:
		say("invoice run %s/%s already exists; nothing charged twice (token %d)", *tenant, *period, h.Token())
	}
	return 0, nil
}

func say(format string, args ...any) {
	fmt.Printf(format+"\n", args...)
}
