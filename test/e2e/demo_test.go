package e2e

import (
	"encoding/xml"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fencedlease/fencedlease/test/testenv"
)

// TestDemo runs `make demo`'s program, on SQLite and on PostgreSQL: it must print the
// timeline and exit 0, which it does only if the invariant held.
func TestDemo(t *testing.T) {
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
			args := []string{"--assets", assets, "--scheduler", filepath.Join(bin, "invoice-scheduler")}
			svg := filepath.Join(t.TempDir(), "timeline.svg")
			if ledger == "PostgreSQL" {
				args = append(args, "--dsn", testenv.StartPostgres(t))
			} else {
				args = append(args, "--svg", svg)
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
			if ledger == "SQLite" {
				checkPicture(t, svg)
			}
		})
	}
}

// checkPicture: --svg draws act 1 from the run's own timeline (the README's picture is
// one): the grants, the revocation, the freeze, the accepted write and the refused one.
func checkPicture(t *testing.T, path string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the demo drew no picture: %v", err)
	}
	if err := xml.Unmarshal(raw, new(struct{ XMLName xml.Name })); err != nil {
		t.Fatalf("the picture is not well-formed XML: %v", err)
	}
	for _, want := range []string{"<svg", "grant 1", "grant 2", "grant 3", "revoke 1 (lease ran out)", "frozen (SIGSTOP)",
		"writes the run, token 2: accepted", "late write with token 1: REFUSED by the ledger"} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("the picture lacks %q", want)
		}
	}
}
