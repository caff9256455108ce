package e2e

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fencedlease/fencedlease/test/testenv"
)

// TestDemo runs `make demo`'s program, on SQLite and on PostgreSQL: it must print the
// timeline and exit 0, which it does only if the invariant held.
func TestDemo(t *testing.T) {
	root := testenv.RepoRoot()
	assets, err := testenv.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	for _, prog := range []string{"demo", "invoice-scheduler"} {
		testenv.Build(t, bin, prog, "./cmd/"+prog)
	}
	for _, ledger := range []string{"SQLite", "PostgreSQL"} {
		t.Run(ledger, func(t *testing.T) {
			args := []string{"--assets", assets, "--scheduler", filepath.Join(bin, "invoice-scheduler"), "--config", filepath.Join(root, "config")}
			if ledger == "PostgreSQL" {
				args = append(args, "--dsn", testenv.StartPostgres(t))
			}
			out, err := exec.Command(filepath.Join(bin, "demo"), args...).CombinedOutput()
			if err != nil {
				t.Fatalf("demo: %v\n%s", err, out)
			}
			for _, want := range []string{
				"SIGSTOP scheduler-1",
				"revoked scheduler-1 (token 1): LeaseExpired",
				"granted token 2 to scheduler-2",
				"invoice run tenant-7/2026-11 created with token 2",
				"nothing charged twice (token 3)",
				`REJECTED by the ledger: stale fencing token for "invoices/tenant-7": offered 1`,
				"ACT 2: FencedLease billing-shards/invoices with spec.holders: 3",
				`slot 1: REJECTED by the ledger: stale fencing token for "invoices/slot-1"`,
				"ok   slots 0 and 2 never stopped",
				"RESULT: the invariant held",
			} {
				if !strings.Contains(string(out), want) {
					t.Errorf("the demo's output lacks %q:\n%s", want, out)
				}
			}
			t.Logf("%s", out)
		})
	}
}
