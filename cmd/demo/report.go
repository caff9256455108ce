package main

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// exitStale is the invoice scheduler's exit code for a write the ledger rejected.
const exitStale = 3

// report prints the ledger and checks the invariant.
func report(ctx context.Context, tl *timeline, o options, k *kubelet, w *operatorWatch) (bool, error) {
	db, err := openReport(o)
	if err != nil {
		return false, err
	}
	defer db.Close()

	fmt.Println("\nLEDGER invoice_runs (tenant, period, token, created_by):")
	runs, err := rows(ctx, db, `SELECT tenant, period, token, created_by FROM invoice_runs ORDER BY tenant, period`)
	if err != nil {
		return false, err
	}
	fmt.Println("LEDGER charges (tenant, period, customer, amount_cents):")
	charges, err := rows(ctx, db, `SELECT tenant, period, customer, amount_cents FROM charges ORDER BY customer`)
	if err != nil {
		return false, err
	}
	fmt.Println("LEDGER fencing_tokens (resource, highest accepted token):")
	if _, err := rows(ctx, db, `SELECT resource, token FROM fencing_tokens`); err != nil {
		return false, err
	}

	fl := &fencingv1.FencedLease{}
	if err := k.c.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: lease}, fl); err != nil {
		return false, err
	}
	code1, _ := k.exitCode(workers[0])
	return printChecks("CHECKS", []check{
		{runs == 1, fmt.Sprintf("exactly one invoice run for tenant-7/2026-11 (found %d)", runs)},
		{charges == len(customerNames), fmt.Sprintf("each customer charged once (%d charges for %d customers)", charges, len(customerNames))},
		{code1 == exitStale, fmt.Sprintf("the paused scheduler's delayed write was rejected as stale (exit code %d)", code1)},
		{fl.Status.LastRevocation != nil && fl.Status.LastRevocation.PodName == workers[0] && fl.Status.Revocations == 1,
			"the paused scheduler was revoked, and only it"},
		{slices.Equal(w.grants, []int64{1, 2, 3}), fmt.Sprintf("tokens granted in order 1, 2, 3 (saw %v)", w.grants)},
	}), nil
}

// check is one part of an act's invariant.
type check struct {
	ok   bool
	what string
}

// printChecks prints the checks under title and says whether all held.
func printChecks(title string, checks []check) bool {
	fmt.Println("\n" + title)
	all := true
	for _, c := range checks {
		mark := "ok  "
		if !c.ok {
			mark, all = "FAIL", false
		}
		fmt.Printf("  %s %s\n", mark, c.what)
	}
	return all
}

// customerNames mirrors the example's customers (cmd/invoice-scheduler/ledger.go).
var customerNames = []string{"acme", "globex", "initech"}

// rows prints a query's rows, indented, and counts them.
func rows(ctx context.Context, db *sql.DB, query string) (int, error) {
	r, err := db.QueryContext(ctx, query)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	cols, _ := r.Columns()
	n := 0
	for r.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := r.Scan(ptrs...); err != nil {
			return n, err
		}
		parts := make([]string, len(vals))
		for i, v := range vals {
			parts[i] = fmt.Sprint(v)
		}
		fmt.Println("  " + strings.Join(parts, "  "))
		n++
	}
	return n, r.Err()
}
