package e2e

import (
	"context"
	"database/sql"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/test/testenv"
)

// TestExamples runs the non-Go examples under `fencedlease-agent hold` against a real PostgreSQL
// (examples/shell/charge.sh, examples/python/charge.py): holder a charges one customer and
// is paused (SIGSTOP) past its 2 s lease; the operator revokes it and grants b, which
// charges everyone with token 2; a wakes and its late charge is refused by the fence, so
// every customer is charged once.
func TestExamples(t *testing.T) {
	dsn := testenv.StartPostgres(t)
	env, cfg, c := testenv.StartT(t)
	dir := t.TempDir()
	bin := testenv.BuildAgent(t, dir)
	kubeconfig := testenv.WriteKubeconfig(t, env, testenv.ShellAdmin, dir)
	python := "/usr/bin/python3" // Debian's, where python3-psycopg2 installs
	if out, err := exec.Command(python, "-c", "import psycopg2").CombinedOutput(); err != nil {
		t.Fatalf("the Python example needs %s with psycopg2 (apt-get install python3-psycopg2; .ci/run does): %v\n%s", python, err, out)
	}
	ex := example{c: c, cfg: cfg, dsn: dsn, bin: bin, kubeconfig: kubeconfig}
	t.Run("shell", func(t *testing.T) {
		ex.run(t, "shell", "2026-11", "sh", filepath.Join(testenv.RepoRoot(), "examples", "shell", "charge.sh"))
	})
	t.Run("python", func(t *testing.T) {
		ex.run(t, "python", "2026-12", python, filepath.Join(testenv.RepoRoot(), "examples", "python", "charge.py"))
	})
}

type example struct {
	c          client.Client
	cfg        *rest.Config
	dsn, bin   string
	kubeconfig string
}

// run plays the pause-and-late-write story with the example command in namespace ns,
// charging for period.
func (e example) run(t *testing.T, ns, period string, command ...string) {
	ctx := context.Background()
	c, dsn := e.c, e.dsn
	candidates(t, c, e.cfg, ns, 2)
	hold := func(pod string, step time.Duration) *exec.Cmd {
		return holdCommand(e.bin, e.kubeconfig, ns, pod, []string{"DSN=" + dsn, "CUSTOMERS=acme globex", "PERIOD=" + period,
			"STEP_SECONDS=" + strconv.Itoa(int(step.Seconds()))}, command...)
	}

	a := hold("a", 3*time.Second)
	var aOut testenv.LockedBuffer
	a.Stdout, a.Stderr = &aOut, &aOut
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Process.Kill() })
	testenv.WaitFor(t, 30*time.Second, "a to charge acme", func() bool { return strings.Contains(aOut.String(), "charged acme for "+period+" with token 1") })
	m := regexp.MustCompile(`started as pid (\d+)`).FindStringSubmatch(aOut.String())
	if m == nil {
		t.Fatalf("no pid in:\n%s", aOut.String())
	}
	script1, _ := strconv.Atoi(m[1]) // the leader of its process group (hold starts it so)

	step := func(s string) { t.Log(s) }
	step("pausing holder a, the script and hold alike, past its lease")
	_ = syscall.Kill(-script1, syscall.SIGSTOP)
	_ = a.Process.Signal(syscall.SIGSTOP)
	testenv.WaitFor(t, 30*time.Second, "b to be granted token 2", func() bool {
		fl := &fencingv1.FencedLease{}
		return c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "invoices"}, fl) == nil && fl.Status.Holder != nil &&
			fl.Status.Holder.PodName == "b" && fl.Status.Holder.Token == 2
	})

	step("holder b charges everyone with token 2")
	if out, err := hold("b", 0).CombinedOutput(); err != nil || !strings.Contains(string(out), "charged globex for "+period+" with token 2") {
		t.Fatalf("holder b: %v\n%s", err, out)
	}

	step("a's script wakes first (its hold still paused) and tries its late charge")
	_ = syscall.Kill(-script1, syscall.SIGCONT)
	testenv.WaitFor(t, 30*time.Second, "a's late write to be refused", func() bool {
		return strings.Contains(aOut.String(), "stale fencing token 1 for invoices/"+ns+"/invoices")
	})
	_ = a.Process.Signal(syscall.SIGCONT)
	if err := a.Wait(); err == nil {
		t.Errorf("holder a's hold exited 0 after its write was refused:\n%s", aOut.String())
	}

	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	charges := map[string]int64{}
	rows, err := db.QueryContext(ctx, `SELECT customer, token FROM charges WHERE period = $1`, period)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var customer string
		var token int64
		if err := rows.Scan(&customer, &token); err != nil {
			t.Fatal(err)
		}
		charges[customer] = token
	}
	if len(charges) != 2 || charges["acme"] != 1 || charges["globex"] != 2 {
		t.Errorf("charges %v: want acme by token 1 (before the pause) and globex by token 2, each once", charges)
	}
	var highest int64
	if err := db.QueryRowContext(ctx, `SELECT token FROM fencing_tokens WHERE resource = $1`, "invoices/"+ns+"/invoices").Scan(&highest); err != nil || highest != 2 {
		t.Errorf("the fence holds %d (%v), want 2", highest, err)
	}
}
