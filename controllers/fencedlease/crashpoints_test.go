package fencedlease

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/internal/grantorder"
	"github.com/fencedlease/fencedlease/pkg/leaserecord"
)

// errCrashed is every write after the process died.
var errCrashed = errors.New("the operator process was killed here")

// crashingClient lets budget writes reach the API server, then fails every later one:
// the operator killed right after its budget-th write of a pass (Sieve's crash between
// writes). budget < 0 never crashes; writes counts what reached the server.
type crashingClient struct {
	client.Client
	budget, writes int
}

func (c *crashingClient) allow() error {
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

// invariants are the protocol's invariants (docs/fencing.md, "What is checked"), checked
// on the API server's objects after every step of a history.
type invariants struct {
	leaseTokens map[string]int64  // each Lease's highest token seen
	statusToken int64             // status.fencingToken's highest
	ended       map[string]bool   // pods seen Released or Revoked, by UID
	podToken    map[string]string // the token each pod was first marked with
	tokenPod    map[int64]string  // the pod UID each token was first seen naming
	holders     int32             // spec.holders, the largest seen
	history     []string          // what happened, for the report
}

func newInvariants() *invariants {
	return &invariants{leaseTokens: map[string]int64{}, ended: map[string]bool{}, podToken: map[string]string{}, tokenPod: map[int64]string{}}
}

func (v *invariants) note(format string, args ...any) {
	v.history = append(v.history, fmt.Sprintf(format, args...))
}

// failer is what the invariants report to: a *testing.T, or a *rapid.T (which shrinks).
type failer interface {
	Helper()
	Fatalf(format string, args ...any)
}

// check reads every object of the fixture and fails on the first invariant broken.
func (v *invariants) check(t failer, c client.Client) {
	t.Helper()
	ctx := context.Background()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%s\nhistory:\n  %s\nobjects:\n  %s", fmt.Sprintf(format, args...), joinLines(v.history), joinLines(dump(c)))
	}
	leases := &coordinationv1.LeaseList{}
	if err := c.List(ctx, leases, client.InNamespace(key.Namespace)); err != nil {
		t.Fatalf("%v", err)
	}
	for i := range leases.Items {
		l := &leases.Items[i]
		rec := leaserecord.Read(l)
		if rec.Token < v.leaseTokens[l.Name] {
			fail("Lease %s: its token went down from %d to %d (holder %q)", l.Name, v.leaseTokens[l.Name], rec.Token, rec.Holder)
		}
		v.leaseTokens[l.Name] = rec.Token
		if rec.Holder != "" && rec.HasHolderUID {
			v.tokenNames(fail, rec.Token, string(rec.HolderUID), "Lease "+l.Name)
		}
	}
	fl := &fencingv1.FencedLease{}
	gone := false
	if err := c.Get(ctx, key, fl); err == nil {
		if fl.Status.FencingToken < v.statusToken {
			fail("status.fencingToken went down from %d to %d", v.statusToken, fl.Status.FencingToken)
		}
		v.statusToken = fl.Status.FencingToken
		v.holders = max(v.holders, holdersOf(fl))
	} else {
		gone = true
	}
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(key.Namespace)); err != nil {
		t.Fatalf("%v", err)
	}
	holding := map[string][]string{} // slot → pods Holding or Draining
	total := 0
	for i := range pods.Items {
		p := &pods.Items[i]
		uid, st := string(p.UID), grantorder.PodState(p)
		tok, has := p.Annotations[fencingv1.TokenAnnotation]
		if has {
			if was, ok := v.podToken[uid]; ok && was != tok {
				fail("pod %s was granted twice: token %s, then %s", p.Name, was, tok)
			}
			v.podToken[uid] = tok
			if n := leaserecord.ParseToken(p.Annotations); n > 0 {
				v.tokenNames(fail, n, uid, "pod "+p.Name)
			}
		}
		switch st {
		case fencingv1.PodReleased, fencingv1.PodRevoked:
			v.ended[uid] = true
		case fencingv1.PodHolding, fencingv1.PodDraining:
			if v.ended[uid] {
				fail("pod %s is %s again after its grant ended", p.Name, st)
			}
			slot := p.Annotations[fencingv1.SlotAnnotation]
			holding[slot] = append(holding[slot], p.Name)
			total++
		}
	}
	if gone {
		// D1: the finalizer went only once no slot's Lease names a live grant.
		alive := map[string]bool{}
		for i := range pods.Items {
			p := &pods.Items[i]
			alive[string(p.UID)] = p.DeletionTimestamp == nil && !v.ended[string(p.UID)]
		}
		for i := range leases.Items {
			if rec := leaserecord.Read(&leases.Items[i]); rec.Holder != "" && alive[string(rec.HolderUID)] {
				fail("the FencedLease is gone while Lease %s names %s with token %d", leases.Items[i].Name, rec.Holder, rec.Token)
			}
		}
	}
	for slot, names := range holding {
		if len(names) > 1 {
			fail("slot %q: pods %v all Holding or Draining", slot, names)
		}
	}
	if v.holders > 0 && int32(total) > v.holders {
		fail("%d pods Holding or Draining, more than spec.holders %d", total, v.holders)
	}
}

// tokenNames records that token names pod uid, and fails when it named another before.
func (v *invariants) tokenNames(fail func(string, ...any), token int64, uid, where string) {
	if was, ok := v.tokenPod[token]; ok && was != uid {
		fail("token %d names two pods: %s, then %s on %s", token, was, uid, where)
	}
	v.tokenPod[token] = uid
}

// dump is what the API server holds, a line an object, for a failure's report.
func dump(c client.Client) []string {
	ctx := context.Background()
	var out []string
	fl := &fencingv1.FencedLease{}
	if err := c.Get(ctx, key, fl); err == nil {
		st := fl.Status
		out = append(out, fmt.Sprintf("FencedLease holders=%d token=%d transitions=%d holder=%s slots=%s finalizers=%v deleting=%v",
			holdersOf(fl), st.FencingToken, st.Transitions, holderLine(st.Holder), slotsLine(st.Slots), fl.Finalizers, fl.DeletionTimestamp != nil))
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
// successor, one grant and slots), a revoke request, a release followed by a grant, and a
// grant on an idle FencedLease.
func crashScenarios() []crashScenario {
	expire := func(t *testing.T, f *casFixture) { f.clock.Step(11 * time.Second) }
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
func TestEveryCrashPointOfAPass(t *testing.T) {
	downs := []whileDown{
		{"nothing", func(*testing.T, *casFixture) {}},
		{"the Lease's holder releases", func(t *testing.T, f *casFixture) { leaseHolderReleases(t, f, key) }},
		{"the Lease's holder renews", func(t *testing.T, f *casFixture) { leaseHolderRenews(t, f, key) }},
	}
	explored := 0
	for _, sc := range crashScenarios() {
		// The writes of the pass under test, uncrashed.
		probe := sc.setup(t)
		sc.before(t, probe)
		counter := &crashingClient{Client: probe.r.Client, budget: -1}
		probe.r.Client = counter
		probe.reconcile(t)
		writes := counter.writes
		if writes < 1 {
			t.Fatalf("%s: the pass under test wrote nothing", sc.name)
		}
		for k := 0; k <= writes; k++ {
			for _, down := range downs {
				t.Run(fmt.Sprintf("%s/crash after write %d of %d/%s", sc.name, k, writes, down.name), func(t *testing.T) {
					f := sc.setup(t)
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
					runOn(t, f, v)
				})
				explored++
			}
		}
	}
	t.Logf("crash points explored: %d (scenarios × writes+1 × what the world did while down)", explored)
}

// TestEveryPassOnAStaleViewAndTwice runs the pass under test of each scenario on the view
// from before the scenario moved (the cache one event behind for the FencedLease, the
// Lease and the pods), and twice in a row (an event delivered twice), each followed by
// the operator running on with its holders renewing, the invariants checked at every
// step.
func TestEveryPassOnAStaleViewAndTwice(t *testing.T) {
	for _, sc := range crashScenarios() {
		for _, variant := range []string{"on a stale view", "twice"} {
			t.Run(sc.name+"/"+variant, func(t *testing.T) {
				f := sc.setup(t)
				v := newInvariants()
				v.check(t, f.c)
				view := objectsOf(f.c)
				sc.before(t, f)
				switch variant {
				case "on a stale view":
					if err := f.onView(view); err != nil {
						t.Fatalf("the pass on a stale view: %v", err)
					}
				case "twice":
					f.reconcile(t)
					v.check(t, f.c)
					f.reconcile(t)
				}
				v.note("pass under test %s", variant)
				v.check(t, f.c)
				runOn(t, f, v)
			})
		}
	}
}

// runOn runs the operator 30 passes, 700 ms apart, its holders renewing every third,
// checking the invariants after each.
func runOn(t *testing.T, f *casFixture, v *invariants) {
	t.Helper()
	for i := range 30 {
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
