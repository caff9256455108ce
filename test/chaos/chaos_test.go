package chaos

import (
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
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
	series   = flag.Int("chaos.series", 2, "How many API-server restarts make one series (make chaos runs 3).")
	long     = flag.Bool("chaos.long", false, "Also inject the long faults (a 30 s API-server outage); make chaos does.")
	database = flag.String("chaos.db", "sqlite", "The ledger's database: sqlite, or postgres (a throwaway server, as the fence's tests start).")
)

const (
	ns        = "chaos"
	leaseName = "ledger"
	// shardsNS holds the FencedLease with slots: shardSlots holders at once, each slot's
	// holders writing their own rows of the shards table, fenced per slot.
	shardsNS, shardsName, shardSlots = "chaos-shards", "shards", 3
	lease                            = 2 * time.Second
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
	shardLed := &ledger{db: led.db, fence: led.fence, table: shardsName, sharded: true}
	for _, l := range []*ledger{led, shardLed} {
		if err := l.create(ctx); err != nil {
			t.Fatal(err)
		}
	}
	spec := fencingv1.FencedLeaseSpec{LeaseDurationSeconds: int32(lease.Seconds()), StartupDeadlineSeconds: 5}
	sharded := spec
	sharded.Holders = shardSlots
	for _, fl := range []*fencingv1.FencedLease{
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: leaseName}, Spec: spec},
		{ObjectMeta: metav1.ObjectMeta{Namespace: shardsNS, Name: shardsName}, Spec: sharded},
	} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fl.Namespace}}); err != nil {
			t.Fatal(err)
		}
		if err := c.Create(ctx, fl); err != nil {
			t.Fatal(err)
		}
	}
	rec := Record(ctx, cs, c, ns, leaseName)
	shardRec := Record(ctx, cs, c, shardsNS, shardsName)
	hs := &holders{cfg: cfg, c: c, ns: ns, lease: leaseName, leaseLength: lease, ledger: led, zombieEvery: 5, started: map[int64]bool{}}
	shardHs := &holders{cfg: cfg, c: c, ns: shardsNS, lease: shardsName, sharded: true, leaseLength: lease, ledger: shardLed,
		zombieEvery: 5, started: map[int64]bool{}}
	work, stopWork := context.WithCancel(ctx)
	var bg sync.WaitGroup
	bg.Add(4)
	go func() { defer bg.Done(); hs.run(work) }()
	go func() { defer bg.Done(); keepCandidates(work, c, ns, leaseName, 2) }()
	go func() { defer bg.Done(); shardHs.run(work) }()
	go func() { defer bg.Done(); keepCandidates(work, c, shardsNS, shardsName, 2) }()
	time.Sleep(settle)
	var faults []Fault
	for round := 0; round < *rounds; round++ {
		for _, f := range faultClasses {
			if f.long && !*long {
				continue
			}
			injected := f.inject(t, ops, env)
			for _, fault := range injected {
				fault.Kind = f.name
				faults = append(faults, fault)
				t.Logf("%s: %s → %s", f.name, fault.Start.Format("15:04:05.000"), fault.End.Format("15:04:05.000"))
			}
			if len(injected) > 0 {
				time.Sleep(settle)
			}
		}
	}
	stopWork()
	bg.Wait()

	h := History{Lease: lease, Faults: faults, Ended: time.Now()}
	rec.Into(&h)
	hs.into(&h)
	if h.Ledger, err = led.rows(context.Background()); err != nil {
		t.Fatal(err)
	}
	if path := os.Getenv("CHAOS_HISTORY"); path != "" {
		raw, _ := json.MarshalIndent(h, "", " ")
		_ = os.WriteFile(path, raw, 0o600)
	}
	report(t, h, hs)
	sh := History{Lease: lease, Faults: faults, Ended: h.Ended}
	shardRec.Into(&sh)
	shardHs.into(&sh)
	if sh.Ledger, err = shardLed.rows(context.Background()); err != nil {
		t.Fatal(err)
	}
	if path := os.Getenv("CHAOS_HISTORY"); path != "" {
		raw, _ := json.MarshalIndent(sh, "", " ")
		_ = os.WriteFile(path+".slots", raw, 0o600)
	}
	sv := CheckSlots(sh, shardSlots)
	t.Logf("FencedLease with %d slots: %s", shardSlots, summary(sh, len(sv)))
	own := 0
	for _, e := range ops.exits() {
		own += len(e)
	}
	t.Logf("operator replicas started: %d; their own exits: %d (a fault's kills are not counted)", ops.n, own)
	if v := Check(h); len(v) > 0 {
		t.Fatalf("%d violations:\n%s", len(v), strings.Join(v, "\n"))
	}
	if len(sv) > 0 {
		t.Fatalf("%d violations in the FencedLease with slots:\n%s", len(sv), strings.Join(sv, "\n"))
	}
	if len(hs.errs)+len(shardHs.errs) > 0 {
		t.Fatalf("ledger errors: %v %v", hs.errs, shardHs.errs)
	}
	if exits := ops.exits(); len(exits) > 0 {
		t.Fatalf("operator replicas exited on their own (each restarted after the kubelet's back-off): %v", exits)
	}
}

func openLedger(t *testing.T, dir string) *ledger {
	var db *sql.DB
	var err error
	l := &ledger{table: "ledger"}
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

// keepCandidates keeps n pods of ns waiting for FencedLease lease, as the webhook leaves them.
func keepCandidates(ctx context.Context, c client.Client, ns, lease string, n int) {
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
				p := testenv.CandidatePod(ns, fmt.Sprintf("w%05d", i), lease)
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

// operators are the running replicas, each under a kubelet-like supervisor
// (testenv.KubeletBackoff: 10 s doubling to 5 min, reset after 10 min): a replica that
// exits on its own is restarted after the kubelet's CrashLoopBackOff, and counted — the
// run fails on any. A replica a fault kills stands for a pod deleted and replaced by its
// ReplicaSet: a new replica with a back-off of its own.
type operators struct {
	t   *testing.T
	env *envtest.Environment
	bin string
	dir string

	mu      sync.Mutex
	n       int
	run     []*testenv.Supervisor
	retired []*testenv.Supervisor
}

func (o *operators) start() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.startLocked()
}

func (o *operators) startLocked() {
	o.n++
	o.run = append(o.run, testenv.Supervise(o.t, o.env, o.bin, o.dir, "operator-"+strconv.Itoa(o.n), testenv.KubeletBackoff, testenv.ReplicaFlags...))
}

// running are the replicas' processes that run now.
func (o *operators) running() []*testenv.Manager {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []*testenv.Manager
	for _, s := range o.run {
		if m := s.Running(); m != nil {
			out = append(out, m)
		}
	}
	return out
}

// leader waits for the replica that leads.
func (o *operators) leader() *testenv.Manager {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		for _, m := range o.running() {
			if m.Leading() {
				return m
			}
		}
	}
	o.t.Fatal("no leader within 30s")
	return nil
}

// standby is a running replica that does not lead, or nil.
func (o *operators) standby() *testenv.Manager {
	for _, m := range o.running() {
		if !m.Leading() {
			return m
		}
	}
	return nil
}

// replace kills the replica running m and starts a new one in its place.
func (o *operators) replace(m *testenv.Manager) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for i, s := range o.run {
		if s.Current() == m {
			s.Stop()
			o.retired = append(o.retired, s)
			o.run = slices.Delete(o.run, i, i+1)
			o.startLocked()
			return
		}
	}
}

// exits are the replicas' own exits (not the kills of a fault), by replica.
func (o *operators) exits() map[string][]time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := map[string][]time.Time{}
	for _, s := range append(slices.Clone(o.run), o.retired...) {
		if e := s.Exits(); len(e) > 0 {
			out[s.Name()] = e
		}
	}
	return out
}

type faultClass struct {
	name string
	long bool // injected only with -chaos.long
	// inject returns the faults it injected (each restart of a series is one, its End
	// the moment the API server was ready), or none when it does not apply (no standby
	// to kill).
	inject func(t *testing.T, o *operators, env *envtest.Environment) []Fault
}

// once times one fault.
func once(f func()) []Fault {
	start := time.Now()
	f()
	return []Fault{{Start: start, End: time.Now()}}
}

var faultClasses = []faultClass{
	{"standby SIGKILL", false, func(t *testing.T, o *operators, _ *envtest.Environment) []Fault {
		m := o.standby()
		if m == nil {
			return nil
		}
		return once(func() { o.replace(m) })
	}},
	{"leader SIGKILL", false, func(t *testing.T, o *operators, _ *envtest.Environment) []Fault {
		m := o.leader()
		return once(func() { o.replace(m) })
	}},
	{"leader SIGSTOP 5s", false, func(t *testing.T, o *operators, _ *envtest.Environment) []Fault {
		m := o.leader()
		// Past its 3 s leader lease: resumed, it finds its leadership lost and campaigns
		// again in the same process.
		return once(func() {
			_ = m.Cmd.Process.Signal(syscall.SIGSTOP)
			time.Sleep(5 * time.Second)
			_ = m.Cmd.Process.Signal(syscall.SIGCONT)
		})
	}},
	{"API server restart", false, func(t *testing.T, _ *operators, env *envtest.Environment) []Fault {
		return apiRestarts(t, env, 1, 0, 0, 0)
	}},
	// Longer than the leader's lease: both replicas lose leadership and campaign again.
	{"API server down 10s", false, func(t *testing.T, _ *operators, env *envtest.Environment) []Fault {
		return apiRestarts(t, env, 1, 10*time.Second, 0, 0)
	}},
	{"API server down 30s", true, func(t *testing.T, _ *operators, env *envtest.Environment) []Fault {
		return apiRestarts(t, env, 1, 30*time.Second, 0, 0)
	}},
	// A control-plane upgrade: restarts in a row, each while the last one's back-off
	// would still run.
	{"API server restarts, 4-10 s apart", false, func(t *testing.T, _ *operators, env *envtest.Environment) []Fault {
		return apiRestarts(t, env, *series, 0, 4*time.Second, 10*time.Second)
	}},
	{"API server restarts, 30-60 s apart", false, func(t *testing.T, _ *operators, env *envtest.Environment) []Fault {
		return apiRestarts(t, env, *series, 0, 30*time.Second, 60*time.Second)
	}},
	// Shorter than the leader's renew deadline (2 s): the leader survives it.
	{"etcd SIGSTOP 1s", false, func(t *testing.T, _ *operators, env *envtest.Environment) []Fault {
		return once(func() { pauseEtcd(t, env, time.Second) })
	}},
	// Longer: the leader loses its lease and a replica takes over.
	{"etcd SIGSTOP 3s", false, func(t *testing.T, _ *operators, env *envtest.Environment) []Fault {
		return once(func() { pauseEtcd(t, env, 3*time.Second) })
	}},
	{"etcd SIGSTOP 10s", false, func(t *testing.T, _ *operators, env *envtest.Environment) []Fault {
		return once(func() { pauseEtcd(t, env, 10*time.Second) })
	}},
}

// apiRestarts restarts the API server n times, each down for at least down (it takes
// its own time to stop and to start), spaced by a random pause in [minGap, maxGap)
// between one being ready and the next stop.
func apiRestarts(t *testing.T, env *envtest.Environment, n int, down, minGap, maxGap time.Duration) []Fault {
	api := env.ControlPlane.GetAPIServer()
	// SIGTERM; a server still draining connections after 5 s is killed, as a kubelet
	// would after a short grace period.
	api.StopTimeout = 5 * time.Second
	var out []Fault
	for i := range n {
		if i > 0 {
			time.Sleep(minGap + rand.N(maxGap-minGap))
		}
		start := time.Now()
		if err := api.Stop(); err != nil && !strings.Contains(err.Error(), "timeout waiting for process") {
			t.Fatal(err)
		}
		time.Sleep(down)
		if err := api.Start(); err != nil { // returns once the server is ready
			t.Fatal(err)
		}
		out = append(out, Fault{Start: start, End: time.Now()})
	}
	return out
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
	injected := map[string]int{}
	for _, f := range h.Faults {
		injected[f.Kind]++
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| fault | injected | recovery p50 | recovery p99 | recovery max | (faults ended under a zombie, left out) |\n|---|---|---|---|---|---|\n")
	rec := Recovery(h)
	for _, f := range faultClasses {
		d := slices.Clone(rec[f.name])
		slices.Sort(d)
		p50, p99, worst := "-", "-", "-"
		if len(d) > 0 {
			at := func(q float64) string { return d[int(q*float64(len(d)-1))].Round(time.Millisecond).String() }
			p50, p99, worst = at(0.5), at(0.99), at(1)
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %d |\n", f.name, injected[f.name], p50, p99, worst, injected[f.name]-len(d))
	}
	b.WriteString(summary(h, len(Check(h))) + "\n")
	t.Log("\n" + b.String())
}

// summary counts what h recorded, with its violations.
func summary(h History, violations int) string {
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
	return fmt.Sprintf("grants %d, revocations %d, holders %d, writes attempted %d / accepted %d / rejected %d (by zombies %d), violations %d, spurious revocations %d",
		grants, len(h.Revocations), len(h.Holders), len(h.Writes), accepted, rejected, zombieRejected, violations, Spurious(h))
}
