package leadership_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	clientretry "k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/fencedlease/fencedlease/controllers/leadership"
	"github.com/fencedlease/fencedlease/test/testenv"
)

// termLog is what each candidacy's leader work did: when it started and returned, and
// whether it ever wrote after its term had ended.
type termLog struct {
	mu       sync.Mutex
	started  map[uint64]time.Time
	returned map[uint64]time.Time
	late     []string // writes that went through although the term had ended
	logs     []string
}

func (l *termLog) note(f func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f()
}

func (l *termLog) startedAt(n uint64) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	at, ok := l.started[n]
	return at, ok
}

// said is true when one line of the log has msg and every one of more.
func (l *termLog) said(msg string, more ...string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.logs {
		if strings.Contains(s, msg) && !slices.ContainsFunc(more, func(m string) bool { return !strings.Contains(s, m) }) {
			return true
		}
	}
	return false
}

// worker is a term's leader work: it writes through the term every 100 ms and, once its
// context ends, goes on trying for straggle — a goroutine that outlives its term.
type worker struct {
	c        *leadership.Candidacy
	writer   client.Client
	cache    client.Reader
	log      *termLog
	straggle time.Duration
}

func (w *worker) Start(ctx context.Context) error {
	n := w.c.Term.N()
	w.log.note(func() { w.log.started[n] = time.Now() })
	defer w.log.note(func() { w.log.returned[n] = time.Now() })
	_ = w.cache.List(ctx, &corev1.ConfigMapList{}, client.InNamespace("default")) // an informer, whose watch an outage breaks
	write := func() error {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "campaign-probe"}}
		patch := client.RawPatch("application/merge-patch+json", fmt.Appendf(nil, `{"data":{"term":"%d"}}`, n))
		return w.writer.Patch(context.Background(), cm, patch)
	}
	for ctx.Err() == nil {
		_ = write()
		time.Sleep(100 * time.Millisecond)
	}
	for end := time.Now().Add(w.straggle); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		ended := errors.Is(w.c.Term.Err(), leadership.ErrTermEnded)
		if err := write(); err == nil && ended {
			w.log.note(func() {
				w.log.late = append(w.log.late, fmt.Sprintf("term %d at %s", n, time.Now().Format("15:04:05.000")))
			})
		}
	}
	return nil
}

// TestCampaignEndsATermBeforeTheNextAndRenewsItAfterAnOutage runs one replica's campaign
// against a real API server: its leadership is taken away (a thief's Lease), and the
// same process campaigns again — the process never exits, the next term's work starts
// only after the last term's straggler has returned, and nothing the old term tried after
// it ended went through; then the API server restarts within the renew deadline, and the
// candidacy is replaced by one with fresh informers as soon as the server answers; on
// stop the Lease is released.
func TestCampaignEndsATermBeforeTheNextAndRenewsItAfterAnOutage(t *testing.T) {
	env, err := testenv.New()
	if err != nil {
		t.Fatal(err)
	}
	testenv.Restartable(env, t.TempDir())
	cfg, c := testenv.StartEnvT(t, env)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "campaign-probe"}}); err != nil {
		t.Fatal(err)
	}

	const leaseName = "campaign-test"
	// The renew deadline outlasts the API server's restart below (stop, 2 s, start: ~6 s
	// on an idle two-core machine) with room to spare, so the term ends by the outage
	// path there, not as a lost leadership.
	lease, renew, retry := 12*time.Second, 10*time.Second, 500*time.Millisecond
	lock, guard, err := leadership.NewLock(cfg, "default", leaseName, "replica-1", renew, nil)
	if err != nil {
		t.Fatal(err)
	}
	logs := &termLog{started: map[uint64]time.Time{}, returned: map[uint64]time.Time{}}
	log := funcr.New(func(prefix, args string) { logs.note(func() { logs.logs = append(logs.logs, args) }) }, funcr.Options{})
	probeCfg := rest.CopyConfig(cfg)
	probeCfg.Timeout = 2 * time.Second
	dc := discovery.NewDiscoveryClientForConfigOrDie(probeCfg)
	campaign := &leadership.Campaign{
		Guard: guard,
		Lock:  lock,
		Log:   log,
		Probe: func(ctx context.Context) error {
			_, err := dc.RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
			return err
		},
		Build: func(cand *leadership.Candidacy) (manager.Manager, error) {
			opts := ctrl.Options{
				Scheme:                              testenv.Scheme(),
				Metrics:                             metricsserver.Options{BindAddress: "0"},
				HealthProbeBindAddress:              "0",
				LeaderElection:                      true,
				LeaderElectionResourceLockInterface: cand.Lock(),
				LeaseDuration:                       &lease,
				RenewDeadline:                       &renew,
				RetryPeriod:                         &retry,
				Controller:                          config.Controller{SkipNameValidation: ptr.To(true)},
			}
			opts.Cache.DefaultWatchErrorHandler = cand.WatchError
			mgr, err := ctrl.NewManager(cfg, opts)
			if err != nil {
				return nil, err
			}
			uncached, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
			if err != nil {
				return nil, err
			}
			return mgr, cand.Manager(mgr).Add(&worker{c: cand, writer: cand.Term.Client(uncached), cache: mgr.GetCache(),
				log: logs, straggle: 1500 * time.Millisecond})
		},
	}
	ran := make(chan error, 1)
	go func() { ran <- campaign.Run(ctx) }()
	waitTerm := func(n uint64, within time.Duration) time.Time {
		t.Helper()
		for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			select {
			case err := <-ran:
				t.Fatalf("the campaign returned (%v) while waiting for term %d", err, n)
			default:
			}
			if at, ok := logs.startedAt(n); ok {
				return at
			}
		}
		t.Fatalf("term %d did not start within %v; log:\n%s", n, within, strings.Join(logs.logs, "\n"))
		return time.Time{}
	}
	waitTerm(1, 30*time.Second)

	By := func(s string) { t.Log(s) }
	By("a thief takes the leader Lease: the replica loses leadership and campaigns again in the same process")
	l := &coordinationv1.Lease{}
	// The replica renews every 500 ms: a renewal between the thief's read and write is a
	// conflict, and the thief reads again. The thief's lease outlasts the replica's renew
	// deadline, or the replica would take the expired Lease back before its term ended.
	if err := clientretry.RetryOnConflict(clientretry.DefaultRetry, func() error {
		if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: leaseName}, l); err != nil {
			return err
		}
		now := metav1.NewMicroTime(time.Now())
		l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.RenewTime, l.Spec.AcquireTime = ptr.To("thief"), ptr.To(int32(lease.Seconds())), &now, &now
		return c.Update(ctx, l)
	}); err != nil {
		t.Fatal(err)
	}
	second := waitTerm(2, 30*time.Second)
	logs.mu.Lock()
	firstReturned, ok := logs.returned[1]
	late := append([]string(nil), logs.late...)
	logs.mu.Unlock()
	if !ok || !second.After(firstReturned) {
		t.Fatalf("term 2 started at %s, before term 1's work returned (%s, returned: %v)",
			second.Format("15:04:05.000"), firstReturned.Format("15:04:05.000"), ok)
	}
	if len(late) > 0 {
		t.Fatalf("writes of an ended term went through: %v", late)
	}
	if !logs.said("leadership lost") {
		t.Fatalf("no \"leadership lost\" in the campaign's log:\n%s", strings.Join(logs.logs, "\n"))
	}
	t.Logf("term 1 returned %s, term 2 started %s", firstReturned.Format("15:04:05.000"), second.Format("15:04:05.000"))

	By("the API server restarts within the renew deadline: a fresh candidacy as soon as it answers")
	api := env.ControlPlane.GetAPIServer()
	stopped := time.Now()
	if err := api.Stop(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if err := api.Start(); err != nil {
		t.Fatal(err)
	}
	ready := time.Now() // Start returns once the server is ready
	third := waitTerm(3, 30*time.Second)
	t.Logf("API server down %v; ready → term 3 working in %v", ready.Sub(stopped).Round(time.Millisecond), third.Sub(ready).Round(time.Millisecond))
	switch {
	case logs.said("the API server answers again after an outage"):
	case ready.Sub(stopped) >= renew-2*retry && logs.said("leadership lost", `"candidacy"=2`):
		// A loaded machine took the API server past the leader's renew deadline (counted
		// from its last renewal, up to a retry before the stop): the term ended as a lost
		// leadership instead, and term 3 started as fresh all the same.
		t.Logf("the outage outlasted the renew deadline (%v): term 2 ended as a lost leadership", renew)
	default:
		t.Fatalf("term 2 did not end for the API server's return:\n%s", strings.Join(logs.logs, "\n"))
	}
	logs.mu.Lock()
	late = append([]string(nil), logs.late...)
	logs.mu.Unlock()
	if len(late) > 0 {
		t.Fatalf("writes of an ended term went through: %v", late)
	}

	By("stopping releases the Lease once the last term's work returned")
	cancel()
	select {
	case <-ran:
	case <-time.After(30 * time.Second):
		t.Fatal("the campaign did not stop within 30 s")
	}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: leaseName}, l); err != nil {
		t.Fatal(err)
	}
	if h := ptr.Deref(l.Spec.HolderIdentity, ""); h != "" {
		t.Fatalf("the Lease still names %q after the campaign stopped", h)
	}
}
