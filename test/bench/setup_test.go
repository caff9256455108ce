package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/test/testenv"
)

// bench is one run: a control plane with an audit log, the operator binary, the
// simulated holders, and the users whose requests are counted.
type bench struct {
	t     *testing.T
	ctx   context.Context
	env   *envtest.Environment
	admin client.Client
	// cgLeader and cgWaiter run client-go's candidates (the first of each lock, the
	// others), so the audit log tells leaders' requests from waiters'; floor measures the
	// API server's write rate.
	cgLeader, cgWaiter, floor kubernetes.Interface
	op                        *testenv.Manager
	pprof                     string // the operator's /debug/pprof address
	audit                     string
	leases                    *leaseWatch
	granted                   *podWatch
	statuses                  *statusWatch
	holders                   *holders
	warm                      *warmWaiters
	rows                      []row
	// goals are issue 23's goals against what this run measured; printed after rows.
	goals goals
	// namespaces counts the scenarios that asked for each namespace name.
	namespaces map[string]int
}

// row is one line of the table: what, the operator's number, client-go's (or the
// floor's), and their ratio.
type row struct{ what, operator, other, ratio string }

const (
	operatorUser = "operator"
	waiterUser   = "clientgo-waiter"
	leaderUser   = "clientgo-leader"
)

func newBench(t *testing.T, ctx context.Context) *bench {
	// client-go's leader election logs every acquisition; thousands of them say nothing here.
	klog.SetLogger(logr.Discard())
	dir := t.TempDir()
	b := &bench{t: t, ctx: ctx, audit: filepath.Join(dir, "audit.log"), goals: goals{}}
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy(operatorUser, waiterUser, leaderUser)), 0o600); err != nil {
		t.Fatal(err)
	}
	env, err := testenv.New()
	if err != nil {
		t.Fatal(err)
	}
	env.ControlPlane.GetAPIServer().Configure().
		Set("audit-policy-file", policy).Set("audit-log-path", b.audit).
		Set("audit-log-maxsize", "0")
	if *finalizerHook {
		if env.WebhookInstallOptions, err = finalizerWebhookOnly(); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	if *finalizerHook {
		if err := serveFinalizerWebhook(ctx, &env.WebhookInstallOptions); err != nil {
			t.Fatal(err)
		}
	}
	b.env = env
	if b.admin, err = client.New(unthrottled(cfg), client.Options{Scheme: testenv.Scheme()}); err != nil {
		t.Fatal(err)
	}
	if *apf {
		if err := installAPF(ctx, b.admin); err != nil {
			t.Fatal(err)
		}
		if err := expectRenewalsClassified(ctx, b.admin, asWorkloads(b.userConfig("apf-probe"))); err != nil {
			t.Fatal(err)
		}
	}
	b.cgLeader = kubernetes.NewForConfigOrDie(renewalRoundTrips.timed(asWorkloads(b.userConfig(leaderUser))))
	b.cgWaiter = kubernetes.NewForConfigOrDie(asWorkloads(b.userConfig(waiterUser)))
	b.floor = b.userClient("floor")
	observer := b.userClient("observer")
	b.holders = newHolders(ctx, renewalRoundTrips.timed(asWorkloads(b.userConfig("holders"))))
	b.leases = watchLeases(ctx, observer, b.holders.saw)
	b.granted = watchPods(ctx, observer)
	if b.statuses, err = watchStatuses(ctx, b.userConfig("status-observer")); err != nil {
		t.Fatal(err)
	}
	b.warm = runWarmWaiters(ctx, asWorkloads(b.userConfig("warm-waiters")))
	// The operator's Go runtime keeps its memory under the limit the Deployment gives it.
	if *memLimit != "" {
		limit := resource.MustParse(*memLimit)
		t.Setenv("FENCEDLEASE_MEMORY_LIMIT", strconv.FormatInt(limit.Value(), 10))
	}
	b.pprof = fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	args := []string{"--leader-elect=false", "--webhook=false", "--health-probe-bind-address=0", "--pprof-bind-address=" + b.pprof}
	args = append(args, strings.Fields(*operatorArgs)...)
	if *apf {
		b.op = testenv.StartManagerAs(t, env, testenv.BuildOperator(t, dir), dir, operatorUser,
			testenv.OperatorUser, testenv.OperatorGroups, args...)
	} else {
		b.op = testenv.StartManager(t, env, testenv.BuildOperator(t, dir), dir, operatorUser, args...)
	}
	return b
}

// userClient is a clientset acting as its own user (a cluster admin), never throttled on
// this side, so the numbers are the API server's and the operator's.
func (b *bench) userClient(name string) kubernetes.Interface {
	return kubernetes.NewForConfigOrDie(b.userConfig(name))
}

func (b *bench) userConfig(name string) *rest.Config {
	u, err := b.env.AddUser(envtest.User{Name: name, Groups: []string{"system:masters"}}, nil)
	if err != nil {
		b.t.Fatal(err)
	}
	// Built-in types only: protobuf, as the operator's client and the agent speak it, so
	// holders and client-go candidates cost the API server the same per request.
	cfg := unthrottled(u.Config())
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	return cfg
}

func unthrottled(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.RateLimiter = flowcontrol.NewFakeAlwaysRateLimiter()
	return cfg
}

// namespace creates a namespace for one scenario and returns its name: name, or name-2,
// name-3... when an earlier scenario of the run took it (the single failover and the
// failover to work both fail over one holder at 5 s, say).
func (b *bench) namespace(name string) string {
	if b.namespaces == nil {
		b.namespaces = map[string]int{}
	}
	b.namespaces[name]++
	if n := b.namespaces[name]; n > 1 {
		name = fmt.Sprintf("%s-%d", name, n)
	}
	if err := b.admin.Create(b.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		b.t.Fatal(err)
	}
	return name
}

func (b *bench) fencedLease(ns, name string, d time.Duration) *fencingv1.FencedLease {
	return &fencingv1.FencedLease{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       fencingv1.FencedLeaseSpec{LeaseDurationSeconds: int32(d.Seconds())},
	}
}

// createAll creates objs with a few dozen requests in flight, as a burst of users would.
func (b *bench) createAll(objs []client.Object) {
	b.t.Helper()
	parallel(len(objs), 32, func(i int) error { return b.admin.Create(b.ctx, objs[i]) }, b.t)
}

// pods are candidate pods for lease (one per name), enlisted as simulated holders.
func (b *bench) pods(ns string, names, leases []string) []client.Object {
	out := make([]client.Object, len(names))
	for i := range names {
		b.holders.enlist(ns, names[i])
		out[i] = testenv.CandidatePod(ns, names[i], leases[i])
	}
	return out
}

// awaitRenewed waits until each named holder has confirmed its grant.
func (b *bench) awaitRenewed(ns string, names []string) {
	b.t.Helper()
	if missing := b.awaitConfirmed(ns, names, 5*time.Minute); len(missing) > 0 {
		b.t.Fatalf("holder %s/%s never renewed", ns, missing[0])
	}
}

// awaitConfirmed waits up to limit for each named holder to confirm its grant, and returns
// those that did not: on a saturated server (1,000 leases of 5 s here) a holder may be
// named on its Lease and give up, or be revoked, before its first renewal gets through.
func (b *bench) awaitConfirmed(ns string, names []string, limit time.Duration) []string {
	b.t.Helper()
	deadline := time.Now().Add(limit)
	var missing []string
	for _, n := range names {
		for b.holders.confirmedAt(ns, n).IsZero() {
			if time.Now().After(deadline) {
				missing = append(missing, n)
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return missing
}

// awaitStatus waits until each FencedLease of want (keyed as keyed makes them) has its
// status caught up with its Lease — the same holder (or none) and token — and returns
// when it saw that: a failover's status write may wait for the new holder's first
// renewal, and the writes counted must include it. Under churn (holders giving up, grants
// moving on) that may take a while; after a minute it logs how many lag, and returns.
func (b *bench) awaitStatus(ns string, want map[string]string) time.Time {
	b.t.Helper()
	return b.awaitStatusWithin(ns, want, time.Minute)
}

// awaitStatusWithin is awaitStatus waiting up to limit.
func (b *bench) awaitStatusWithin(ns string, want map[string]string, limit time.Duration) time.Time {
	b.t.Helper()
	deadline := time.Now().Add(limit)
	for {
		behind, err := b.statuses.behind(b.ctx, ns, want, b.leases)
		if err != nil {
			b.t.Fatal(err)
		}
		if behind == 0 {
			return time.Now()
		}
		if time.Now().After(deadline) {
			b.t.Logf("%s: %d FencedLeases' status still behind their Lease after %v; counting up to now", ns, behind, limit)
			return time.Now()
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// await waits until each Lease names its holder, up to limit.
func (b *bench) await(want map[string]string, limit time.Duration) []transition {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, limit)
	defer cancel()
	ts, err := b.leases.waitFor(ctx, want)
	if err != nil {
		missing := 0
		for k, h := range want {
			if b.leases.holderOf(k) != h {
				missing++
			}
		}
		b.t.Fatalf("%d of %d Leases did not name their next holder within %v", missing, len(want), limit)
	}
	return ts
}

// operatorRequests counts the operator's requests in [from, to) in namespace ns.
func (b *bench) operatorRequests(ns string, from, to time.Time) requests {
	return b.requestsOf(operatorUser, ns, from, to)
}

func (b *bench) requestsOf(user, ns string, from, to time.Time) requests {
	// The log is written as requests finish: give the last ones a moment.
	time.Sleep(time.Second)
	as := ""
	if *apf && user == operatorUser {
		as = testenv.OperatorUser
	}
	r, err := auditCount(b.audit, user, as, from, to, func(n string) bool { return n == ns })
	if err != nil {
		b.t.Fatal(err)
	}
	return r
}

// rss is the operator's resident memory, from /proc.
func (b *bench) rss() string {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", b.op.Cmd.Process.Pid))
	if err != nil {
		return "?"
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "VmRSS:" {
			kb, _ := strconv.Atoi(f[1])
			return fmt.Sprintf("%d MiB", kb/1024)
		}
	}
	return "?"
}

func (b *bench) add(what, operator, other, ratio string) {
	b.rows = append(b.rows, row{what, operator, other, ratio})
	b.t.Logf("%s: %s | %s | %s", what, operator, other, ratio)
}

func (b *bench) print() {
	var s strings.Builder
	s.WriteString("\n| what | fencedlease | client-go leader election, or the floor | ratio |\n|---|---|---|---|\n")
	for _, r := range b.rows {
		fmt.Fprintf(&s, "| %s | %s | %s | %s |\n", r.what, r.operator, r.other, r.ratio)
	}
	s.WriteString(b.goals.table())
	fmt.Println(s.String())
}

// parallel runs f(0..n-1) on workers goroutines and fails t on the first error.
func parallel(n, workers int, f func(int) error, t testing.TB) {
	t.Helper()
	next := make(chan int)
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if first != nil {
		t.Fatal(first)
	}
}

func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return out
}

// metricsSize scrapes the operator: the page's size and its number of series.
func (b *bench) metricsSize() (int, int) {
	page, err := b.op.Scrape(30 * time.Second)
	if err != nil {
		b.t.Fatal(err)
	}
	series := 0
	for line := range strings.SplitSeq(page, "\n") {
		if line != "" && !strings.HasPrefix(line, "#") {
			series++
		}
	}
	return len(page), series
}
