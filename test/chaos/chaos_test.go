package chaos

import (
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	_ "modernc.org/sqlite"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/pkg/fence"
	"github.com/fencedlease/fencedlease/test/testenv"
)

var (
	rounds   = flag.Int("chaos.rounds", 1, "How many times to inject each fault (make chaos runs more).")
	replicas = flag.Int("chaos.replicas", 2, "How many operator replicas run (1 or 2).")
	database = flag.String("chaos.db", "sqlite", "The ledger's database: sqlite, or postgres (a throwaway server, as the fence's tests start).")
)

const (
	ns        = "chaos"
	leaseName = "ledger"
	lease     = 2 * time.Second
	// settle is the quiet time after each fault, for the grants to resume.
	settle = 8 * time.Second
)

// TestChaos runs two operator replicas (the real binary), holders writing through the
// SQL fence, and injects each fault class -chaos.rounds times; then checks the history.
func TestChaos(t *testing.T) {
	dir := t.TempDir()
	env, err := testenv.New()
	if err != nil {
		t.Fatal(err)
	}
	testenv.Restartable(env, t.TempDir())
	cfg, c := testenv.StartEnvT(t, env)
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()

	ops := &operators{t: t, env: env, bin: testenv.BuildOperator(t, dir), dir: dir}
	for range *replicas {
		ops.start()
	}

	led := openLedger(t, dir)
	if err := led.create(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: leaseName},
		Spec: fencingv1.FencedLeaseSpec{LeaseDurationSeconds: int32(lease.Seconds()), StartupDeadlineSeconds: 5}}); err != nil {
		t.Fatal(err)
	}
	rec := record(ctx, cs, c, ns, leaseName)
	hs := &holders{cfg: cfg, c: c, ns: ns, lease: leaseName, leaseLength: lease, ledger: led, zombieEvery: 5, started: map[int64]bool{}}
	work, stopWork := context.WithCancel(ctx)
	var bg sync.WaitGroup
	bg.Add(2)
	go func() { defer bg.Done(); hs.run(work) }()
	go func() { defer bg.Done(); keepCandidates(work, c, 2) }()
	supervised, stopSupervising := context.WithCancel(ctx)
	defer stopSupervising()
	go ops.supervise(supervised)

	time.Sleep(settle)
	var faults []Fault
	for round := 0; round < *rounds; round++ {
		for _, f := range faultClasses {
			start := time.Now()
			if !f.inject(t, ops, env) {
				continue
			}
			faults = append(faults, Fault{Kind: f.name, Start: start, End: time.Now()})
			t.Logf("%s: %s → %s", f.name, start.Format("15:04:05.000"), time.Now().Format("15:04:05.000"))
			time.Sleep(settle)
		}
	}
	stopWork()
	bg.Wait()

	h := History{Lease: lease, Faults: faults}
	rec.into(&h)
	hs.into(&h)
	if h.Ledger, err = led.rows(context.Background()); err != nil {
		t.Fatal(err)
	}
	if path := os.Getenv("CHAOS_HISTORY"); path != "" {
		raw, _ := json.MarshalIndent(h, "", " ")
		_ = os.WriteFile(path, raw, 0o600)
	}
	report(t, h, hs)
	if v := Check(h); len(v) > 0 {
		t.Fatalf("%d violations:\n%s", len(v), strings.Join(v, "\n"))
	}
	if len(hs.errs) > 0 {
		t.Fatalf("ledger errors: %v", hs.errs)
	}
}

func openLedger(t *testing.T, dir string) *ledger {
	var db *sql.DB
	var err error
	l := &ledger{}
	switch *database {
	case "sqlite":
		db, err = sql.Open("sqlite", "file:"+filepath.Join(dir, "ledger.db")+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate")
		l.fence.Dialect = fence.SQLite
	case "postgres":
		db, err = sql.Open("pgx", testenv.StartPostgres(t))
		l.fence.Dialect = fence.Postgres
	default:
		t.Fatalf("-chaos.db=%q: want sqlite or postgres", *database)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	l.db = db
	return l
}

// keepCandidates keeps n pods waiting for the grant, as the webhook leaves them.
func keepCandidates(ctx context.Context, c client.Client, n int) {
	for i := 0; ctx.Err() == nil; {
		pods := &corev1.PodList{}
		if c.List(ctx, pods, client.InNamespace(ns)) == nil {
			waiting := 0
			for _, p := range pods.Items {
				if p.Annotations[fencingv1.StateAnnotation] == string(fencingv1.PodWaiting) {
					waiting++
				}
			}
			for ; waiting < n; waiting++ {
				i++
				p := testenv.CandidatePod(ns, fmt.Sprintf("w%05d", i), leaseName)
				if c.Create(ctx, p) != nil {
					break
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// operators are the running replicas. A replica that exits (it lost its leadership) is
// replaced, as the kubelet restarts a container.
type operators struct {
	t   *testing.T
	env *envtest.Environment
	bin string
	dir string

	mu  sync.Mutex
	n   int
	run []*testenv.Manager
}

func (o *operators) start() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.startLocked()
}

func (o *operators) startLocked() {
	o.n++
	o.run = append(o.run, testenv.StartManager(o.t, o.env, o.bin, o.dir, "operator-"+strconv.Itoa(o.n), testenv.ReplicaFlags...))
}

// supervise replaces replicas that exited, until ctx ends.
func (o *operators) supervise(ctx context.Context) {
	for ctx.Err() == nil {
		o.mu.Lock()
		for _, m := range slices.Clone(o.run) {
			if m.Exited() {
				o.replaceLocked(m)
			}
		}
		o.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// leader waits for the replica that leads.
func (o *operators) leader() *testenv.Manager {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		o.mu.Lock()
		run := slices.Clone(o.run)
		o.mu.Unlock()
		for _, m := range run {
			if !m.Exited() && m.Leading() {
				return m
			}
		}
	}
	o.t.Fatal("no leader within 30s")
	return nil
}

// standby is a running replica that does not lead, or nil.
func (o *operators) standby() *testenv.Manager {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, m := range o.run {
		if !m.Exited() && !m.Leading() {
			return m
		}
	}
	return nil
}

// replace kills m (if it still runs) and starts a new replica in its place, unless it
// was replaced already.
func (o *operators) replace(m *testenv.Manager) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.replaceLocked(m)
}

func (o *operators) replaceLocked(m *testenv.Manager) {
	if !slices.Contains(o.run, m) {
		return
	}
	m.Kill()
	o.run = slices.DeleteFunc(o.run, func(x *testenv.Manager) bool { return x == m })
	o.startLocked()
}

type faultClass struct {
	name string
	// inject returns false when the fault does not apply (no standby to kill).
	inject func(t *testing.T, o *operators, env *envtest.Environment) bool
}

var faultClasses = []faultClass{
	{"standby SIGKILL", func(t *testing.T, o *operators, _ *envtest.Environment) bool {
		m := o.standby()
		if m == nil {
			return false
		}
		o.replace(m)
		return true
	}},
	{"leader SIGKILL", func(t *testing.T, o *operators, _ *envtest.Environment) bool {
		o.replace(o.leader())
		return true
	}},
	{"leader SIGSTOP 5s", func(t *testing.T, o *operators, _ *envtest.Environment) bool {
		m := o.leader()
		_ = m.Cmd.Process.Signal(syscall.SIGSTOP)
		time.Sleep(5 * time.Second) // past its 3 s leader lease
		_ = m.Cmd.Process.Signal(syscall.SIGCONT)
		select { // it finds its leadership lost and exits, as in a cluster, where it restarts
		case <-m.Done():
		case <-time.After(10 * time.Second):
		}
		o.replace(m)
		return true
	}},
	{"API server restart", func(t *testing.T, _ *operators, env *envtest.Environment) bool {
		api := env.ControlPlane.GetAPIServer()
		// SIGTERM; a server still draining connections after 5 s is killed, as a kubelet
		// would after a short grace period.
		api.StopTimeout = 5 * time.Second
		if err := api.Stop(); err != nil && !strings.Contains(err.Error(), "timeout waiting for process") {
			t.Fatal(err)
		}
		if err := api.Start(); err != nil {
			t.Fatal(err)
		}
		return true
	}},
	// Shorter than the leader's renew deadline (2 s): the leader survives it.
	{"etcd SIGSTOP 1s", func(t *testing.T, _ *operators, env *envtest.Environment) bool {
		pauseEtcd(t, env, time.Second)
		return true
	}},
	// Longer: the leader loses its lease and a replica takes over.
	{"etcd SIGSTOP 3s", func(t *testing.T, _ *operators, env *envtest.Environment) bool {
		pauseEtcd(t, env, 3*time.Second)
		return true
	}},
}

func pauseEtcd(t *testing.T, env *envtest.Environment, d time.Duration) {
	out, err := exec.Command("pgrep", "-f", "etcd.*"+env.ControlPlane.Etcd.DataDir).Output()
	if err != nil {
		t.Fatalf("finding etcd: %v", err)
	}
	pid, err := strconv.Atoi(strings.Fields(string(out))[0])
	if err != nil {
		t.Fatal(err)
	}
	_ = syscall.Kill(pid, syscall.SIGSTOP)
	time.Sleep(d)
	_ = syscall.Kill(pid, syscall.SIGCONT)
}

// report prints the run's table.
func report(t *testing.T, h History, hs *holders) {
	grants := 0
	for _, s := range h.States {
		if s.State == string(fencingv1.PodHolding) {
			grants++
		}
	}
	var accepted, rejected, zombieRejected int
	for _, w := range h.Writes {
		switch {
		case w.Accepted:
			accepted++
		case w.Zombie:
			zombieRejected++
			rejected++
		default:
			rejected++
		}
	}
	injected := map[string]int{}
	for _, f := range h.Faults {
		injected[f.Kind]++
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| fault | injected | recovery p50 | recovery max | (faults ended under a zombie, left out) |\n|---|---|---|---|---|\n")
	rec := Recovery(h)
	for _, f := range faultClasses {
		d := slices.Clone(rec[f.name])
		slices.Sort(d)
		p50, worst := "-", "-"
		if len(d) > 0 {
			p50, worst = d[(len(d)-1)/2].Round(time.Millisecond).String(), d[len(d)-1].Round(time.Millisecond).String()
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %d |\n", f.name, injected[f.name], p50, worst, injected[f.name]-len(d))
	}
	fmt.Fprintf(&b, "grants %d, revocations %d, holders %d, writes attempted %d / accepted %d / rejected %d (by zombies %d), violations %d, spurious revocations %d\n",
		grants, len(h.Revocations), len(h.Holders), len(h.Writes), accepted, rejected, zombieRejected, len(Check(h)), Spurious(h))
	t.Log("\n" + b.String())
}
