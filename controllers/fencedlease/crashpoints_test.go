package fencedlease

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/controllers/fencedlease/internal/decision"
	"github.com/fencedlease/fencedlease/pkg/leaserecord"
	protocol "github.com/fencedlease/fencedlease/test/invariants"
)

// errCrashed is every write after the process died.
var errCrashed = errors.New("the operator process was killed here")

// crashingClient lets budget writes reach the API server, then fails every later one:
// the operator killed right after its budget-th write of a pass (Sieve's crash between
// writes). budget < 0 never crashes; writes counts what reached the server. The slots of a
// pass write at once: the count is shared.
type crashingClient struct {
	client.Client
	mu             sync.Mutex
	budget, writes int
}

func (c *crashingClient) allow() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.budget >= 0 && c.writes >= c.budget {
		return errCrashed
	}
	c.writes++
	return nil
}

func (c *crashingClient) Create(ctx context.Context, o client.Object, opts ...client.CreateOption) error {
	if err := c.allow(); err != nil {
		return err
	}
	return c.Client.Create(ctx, o, opts...)
}

func (c *crashingClient) Update(ctx context.Context, o client.Object, opts ...client.UpdateOption) error {
	if err := c.allow(); err != nil {
		return err
	}
	return c.Client.Update(ctx, o, opts...)
}

func (c *crashingClient) Patch(ctx context.Context, o client.Object, p client.Patch, opts ...client.PatchOption) error {
	if err := c.allow(); err != nil {
		return err
	}
	return c.Client.Patch(ctx, o, p, opts...)
}

func (c *crashingClient) Delete(ctx context.Context, o client.Object, opts ...client.DeleteOption) error {
	if err := c.allow(); err != nil {
		return err
	}
	return c.Client.Delete(ctx, o, opts...)
}

func (c *crashingClient) Status() client.SubResourceWriter {
	return crashingStatus{c.Client.Status(), c}
}

type crashingStatus struct {
	client.SubResourceWriter
	c *crashingClient
}

func (s crashingStatus) Update(ctx context.Context, o client.Object, opts ...client.SubResourceUpdateOption) error {
	if err := s.c.allow(); err != nil {
		return err
	}
	return s.SubResourceWriter.Update(ctx, o, opts...)
}

// invariants are the protocol's invariants (test/invariants, written once for every test
// that watches the protocol run), checked on the API server's objects after every step of
// a history, and the history for a failure's report.
type invariants struct {
	checker *protocol.Checker
	history []string // what happened, for the report
}

func newInvariants() *invariants { return &invariants{checker: protocol.New(key.Name)} }

func (v *invariants) note(format string, args ...any) {
	v.history = append(v.history, fmt.Sprintf(format, args...))
}

// failer is what the invariants report to: a *testing.T, or a *rapid.T (which shrinks).
type failer interface {
	Helper()
	Fatalf(format string, args ...any)
}

// check reads the FencedLease, then its Leases, then its pods, and fails on the
// invariants that read breaks.
func (v *invariants) check(t failer, c client.Client) {
	t.Helper()
	ctx := context.Background()
	var fl *fencingv1.FencedLease
	if got := (&fencingv1.FencedLease{}); c.Get(ctx, key, got) == nil {
		fl = got
	}
	leases, pods := &coordinationv1.LeaseList{}, &corev1.PodList{}
	if err := c.List(ctx, leases, client.InNamespace(key.Namespace)); err != nil {
		t.Fatalf("%v", err)
	}
	if err := c.List(ctx, pods, client.InNamespace(key.Namespace)); err != nil {
		t.Fatalf("%v", err)
	}
	if broken := v.checker.Objects(fl, leases.Items, pods.Items); len(broken) > 0 {
		t.Fatalf("%s\nhistory:\n  %s\nobjects:\n  %s", strings.Join(broken, "\n"), joinLines(v.history), joinLines(dump(c)))
	}
}

// dump is what the API server holds, a line an object, for a failure's report.
func dump(c client.Client) []string {
	ctx := context.Background()
	var out []string
	fl := &fencingv1.FencedLease{}
	if err := c.Get(ctx, key, fl); err == nil {
		st := fl.Status
		out = append(out, fmt.Sprintf("FencedLease holders=%d token=%d transitions=%d holder=%s slots=%s finalizers=%v deleting=%v",
			decision.HoldersOf(fl), st.FencingToken, st.Transitions, holderLine(st.Holder), slotsLine(st.Slots), fl.Finalizers, fl.DeletionTimestamp != nil))
	}
	leases := &coordinationv1.LeaseList{}
	_ = c.List(ctx, leases, client.InNamespace(key.Namespace))
	for i := range leases.Items {
		r := leaserecord.Read(&leases.Items[i])
		out = append(out, fmt.Sprintf("Lease %s holder=%q uid=%q(%v) token=%d renewed=%v", leases.Items[i].Name, r.Holder, r.HolderUID, r.HasHolderUID, r.Token, r.Renewed()))
	}
	pods := &corev1.PodList{}
	_ = c.List(ctx, pods, client.InNamespace(key.Namespace))
	for i := range pods.Items {
		p := &pods.Items[i]
		out = append(out, fmt.Sprintf("Pod %s uid=%s labels=%v annotations=%v gates=%d", p.Name, p.UID, p.Labels, p.Annotations, len(p.Spec.SchedulingGates)))
	}
	return out
}

func holderLine(h *fencingv1.Holder) string {
	if h == nil {
		return "none"
	}
	return fmt.Sprintf("%s/%s#%d", h.PodName, h.PodUID, h.Token)
}

func slotsLine(slots []fencingv1.Slot) string {
	out := ""
	for _, s := range slots {
		rv := "none"
		if s.LastRevocation != nil {
			rv = fmt.Sprintf("%s#%d(%s)", s.LastRevocation.PodName, s.LastRevocation.Token, s.LastRevocation.Reason)
		}
		out += fmt.Sprintf("[%d holder=%s revoked=%s]", s.Slot, holderLine(s.Holder), rv)
	}
	return out
}

func joinLines(lines []string) string {
	out := ""
	for i, l := range lines {
		if i > 0 {
			out += "\n  "
		}
		out += l
	}
	return out
}

// crashScenario brings a fixture to the pass under test; the harness then crashes that
// pass after each of its writes in turn.
type crashScenario struct {
	name  string
	setup func(t *testing.T) *casFixture
	// before moves the world to where the pass under test decides something.
	before func(t *testing.T, f *casFixture)
}

// whileDown is what the world may do while the operator is down.
type whileDown struct {
	name string
	do   func(t *testing.T, f *casFixture)
}

// leaseHolderReleases is the holder the Lease names releasing (after one renewal), when
// the Lease names one.
func leaseHolderReleases(t *testing.T, f *casFixture, k client.ObjectKey) {
	t.Helper()
	if !leaseHolderRenews(t, f, k) {
		return
	}
	l := fetch(t, f.c, k, &coordinationv1.Lease{})
	leaserecord.Release(l)
	if err := f.c.Update(context.Background(), l); err != nil {
		t.Fatal(err)
	}
}

// leaseHolderRenews is the holder the Lease names renewing, when it names one (true).
func leaseHolderRenews(t *testing.T, f *casFixture, k client.ObjectKey) bool {
	t.Helper()
	l := fetch(t, f.c, k, &coordinationv1.Lease{})
	if leaserecord.Read(l).Holder == "" {
		return false
	}
	leaserecord.Renew(l, f.clock.Now().Add(time.Hour))
	if err := f.c.Update(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	return true
}

// crashScenarios cover the passes that write more than once: a hand-over (Cold and Warm
// successor, one grant and slots), a revoke request, a release followed by a grant, a
// grant on an idle FencedLease, and a Warm FencedLease's new candidates let run (W1, one
// write each; the grant is the next pass's).
func crashScenarios() []crashScenario {
	// expire steps past the grant's limit: its lease, or its startup deadline (which the
	// API server defaults, and the fake client does not).
	expire := func(t *testing.T, f *casFixture) {
		fl := fetch(t, f.c, key, &fencingv1.FencedLease{})
		f.clock.Step(time.Duration(max(fl.Spec.StartupDeadlineSeconds, fl.Spec.LeaseDurationSeconds)+1) * time.Second)
	}
	renewedThenExpired := func(t *testing.T, f *casFixture) {
		f.renew(t)
		f.reconcile(t)
		expire(t, f)
	}
	return []crashScenario{
		{"expiry hand-over to a Cold pod", func(t *testing.T) *casFixture { return newCASFixture(t) }, renewedThenExpired},
		{"expiry hand-over to a Warm pod", func(t *testing.T) *casFixture {
			return newCASFixtureWaiting(t, warmPod("b", t0.Add(time.Second)))
		}, renewedThenExpired},
		{"startup deadline to a Cold pod", func(t *testing.T) *casFixture { return newCASFixture(t) }, expire},
		{"revoke request", func(t *testing.T) *casFixture { return newCASFixture(t) }, func(t *testing.T, f *casFixture) {
			f.edit(t, func(fl *fencingv1.FencedLease) { fl.Annotations = map[string]string{fencingv1.RevokeAnnotation: "1"} }, false)
		}},
		{"release, then a grant", func(t *testing.T) *casFixture { return newCASFixture(t) }, func(t *testing.T, f *casFixture) {
			leaseHolderReleases(t, f, key)
		}},
		{"grant on an idle FencedLease", func(t *testing.T) *casFixture { return newIdleFixture(t, 4) }, func(*testing.T, *casFixture) {}},
		{"a Warm FencedLease's new candidates let run (W1)", func(t *testing.T) *casFixture { return newIdleWarmFixture(t) }, func(*testing.T, *casFixture) {}},
		{"slot 0 hand-over to a Warm pod, slot 1 renewing", func(t *testing.T) *casFixture {
			return newSlotsFixture(t, warmPod("b", t0.Add(time.Second)))
		}, func(t *testing.T, f *casFixture) {
			expire(t, f)
			f.renewSlot(t, 1)
		}},
	}
}

// TestEveryCrashPointOfAPass crashes the pass under test of each scenario after each of
// its writes in turn (k = 0 … all), lets the world move while the operator is down, then
// restarts it (nothing remembered) and runs it for several lease-scale steps, checking
// the invariants after every step. The pass with no crash is explored too.
// crashpoints_envtest_test.go runs the same on a real API server.
func TestEveryCrashPointOfAPass(t *testing.T) {
	oneExplorationAtATime(t)
	explored := exploreCrashPoints(t, func(_ *testing.T, f *casFixture) *casFixture { return f }, crashDowns(), 30)
	t.Logf("crash points explored: %d (scenarios × writes+1 × what the world did while down)", explored)
}

// crashDowns are what the world does while the operator is down.
func crashDowns() []whileDown {
	return []whileDown{
		{"nothing", func(*testing.T, *casFixture) {}},
		{"the Lease's holder releases", func(t *testing.T, f *casFixture) { leaseHolderReleases(t, f, key) }},
		{"the Lease's holder renews", func(t *testing.T, f *casFixture) { leaseHolderRenews(t, f, key) }},
	}
}

// exploreCrashPoints runs every crash point of every scenario on the fixture place makes
// of the scenario's own (the fake API server's, or a real one's), the operator running on
// for steps passes after its restart, and returns how many it explored.
func exploreCrashPoints(t *testing.T, place func(*testing.T, *casFixture) *casFixture, downs []whileDown, steps int) int {
	explored := 0
	for _, sc := range crashScenarios() {
		// The writes of the pass under test, uncrashed.
		probe := place(t, sc.setup(t))
		sc.before(t, probe)
		counter := &crashingClient{Client: probe.r.Client, budget: -1}
		probe.r.Client = counter
		probe.reconcile(t)
		writes := counter.writes
		if writes < 1 {
			t.Fatalf("%s: the pass under test wrote nothing\nobjects:\n  %s", sc.name, joinLines(dump(probe.c)))
		}
		for k := 0; k <= writes; k++ {
			for _, down := range downs {
				t.Run(fmt.Sprintf("%s/crash after write %d of %d/%s", sc.name, k, writes, down.name), func(t *testing.T) {
					f := place(t, sc.setup(t))
					v := newInvariants()
					v.check(t, f.c)
					sc.before(t, f)
					v.check(t, f.c)
					real := f.r.Client
					f.r.Client = &crashingClient{Client: real, budget: k}
					_, err := f.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key})
					if err != nil && !errors.Is(err, errCrashed) {
						t.Fatalf("the pass under test: %v", err)
					}
					v.note("pass under test, killed after %d write(s)", k)
					v.check(t, f.c)
					f.r.Client = real
					f.restart()
					down.do(t, f)
					v.note("while down: %s", down.name)
					v.check(t, f.c)
					runOnFor(t, f, v, steps)
				})
				explored++
			}
		}
	}
	return explored
}

// TestEveryPassOnAStaleViewAndTwice runs the pass under test of each scenario on the view
// from before the scenario moved — for every kind (the cache one event behind for the
// FencedLease, the Leases and the pods), for one kind alone, or for all but the
// FencedLease (events of different kinds delivered out of order) — and twice in a row
// (an event delivered twice), each followed by the operator running on with its holders
// renewing, the invariants checked at every step.
func TestEveryPassOnAStaleViewAndTwice(t *testing.T) {
	oneExplorationAtATime(t)
	// Each informer is its own watch: one kind may be behind while the others are not,
	// which is how events of different kinds arrive out of order.
	behind := map[string]func(client.Object) bool{
		"on a stale view":                  func(client.Object) bool { return true },
		"with the FencedLease behind":      isKind[*fencingv1.FencedLease],
		"with the Leases behind":           isKind[*coordinationv1.Lease],
		"with the pods behind":             isKind[*corev1.Pod],
		"with the FencedLease ahead alone": func(o client.Object) bool { return !isKind[*fencingv1.FencedLease](o) },
	}
	runs := 0
	for _, sc := range crashScenarios() {
		for _, variant := range append(slices.Sorted(maps.Keys(behind)), "twice") {
			t.Run(sc.name+"/"+variant, func(t *testing.T) {
				f := sc.setup(t)
				v := newInvariants()
				v.check(t, f.c)
				before := objectsOf(f.c)
				sc.before(t, f)
				if stale, ok := behind[variant]; ok {
					if err := f.onView(mixedView(before, objectsOf(f.c), stale)); err != nil {
						t.Fatalf("the pass %s: %v", variant, err)
					}
				} else {
					f.reconcile(t)
					v.check(t, f.c)
					f.reconcile(t)
				}
				v.note("pass under test %s", variant)
				v.check(t, f.c)
				runOn(t, f, v)
			})
			runs++
		}
	}
	t.Logf("passes on a view behind, in part or whole, or twice: %d", runs)
}

func isKind[T client.Object](o client.Object) bool {
	_, ok := o.(T)
	return ok
}

// mixedView is the objects as now, but those stale picks as they were before (an object
// created since is not there yet; one deleted since is there still).
func mixedView(before, now []client.Object, stale func(client.Object) bool) []client.Object {
	var out []client.Object
	for _, o := range before {
		if stale(o) {
			out = append(out, o)
		}
	}
	for _, o := range now {
		if !stale(o) {
			out = append(out, o)
		}
	}
	return out
}

// runOn runs the operator 30 passes, 700 ms apart, its holders renewing every third,
// checking the invariants after each.
func runOn(t *testing.T, f *casFixture, v *invariants) { runOnFor(t, f, v, 30) }

// runOnFor is runOn for steps passes.
func runOnFor(t *testing.T, f *casFixture, v *invariants, steps int) {
	t.Helper()
	for i := range steps {
		f.clock.Step(700 * time.Millisecond)
		if i%3 == 0 {
			leaseHolderRenewsAny(t, f)
		}
		f.reconcile(t)
		v.note("step %d", i)
		v.check(t, f.c)
	}
}

// leaseHolderRenewsAny is every Lease's holder renewing: holders alive after a restart.
func leaseHolderRenewsAny(t *testing.T, f *casFixture) {
	t.Helper()
	leases := &coordinationv1.LeaseList{}
	if err := f.c.List(context.Background(), leases, client.InNamespace(key.Namespace)); err != nil {
		t.Fatal(err)
	}
	for i := range leases.Items {
		leaseHolderRenews(t, f, client.ObjectKeyFromObject(&leases.Items[i]))
	}
}
