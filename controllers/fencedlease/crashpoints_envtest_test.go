package fencedlease

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/controllers/fencedlease/internal/decision"
	"github.com/fencedlease/fencedlease/test/plane"
)

// TestEveryCrashPointOnTheAPIServer runs the crash-point harness (TestEveryCrashPointOfAPass)
// on a real kube-apiserver and etcd: each scenario's objects are created there, and the
// controller's writes meet the API server's own validation, resourceVersions,
// compare-and-swap and defaulting instead of the fake client's. The operator runs on for
// fewer steps after its restart, the invariants checked at each.
func TestEveryCrashPointOnTheAPIServer(t *testing.T) {
	oneExplorationAtATime(t)
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	env, err := plane.New()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(plane.StartT(t, env), client.Options{Scheme: NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: key.Namespace}}); err != nil {
		t.Fatal(err)
	}
	onAPI := func(t *testing.T, f *casFixture) *casFixture { return onAPIServer(t, c, f) }
	// Two of the three while-down moves (a renewal while down is the fake harness's), and
	// ten passes after the restart: within make test's budget.
	explored := exploreCrashPoints(t, onAPI, crashDowns()[:2], 10)
	t.Logf("crash points explored on the API server: %d", explored)
}

// onAPIServer empties the namespace of the API server c reaches, creates there what the
// fake fixture f holds — the pods first, their new UIDs written wherever f's objects named
// the old ones — and returns a fixture whose operator reads and writes that API server,
// with a fresh fake clock at f's time, and has seen what f's had seen.
func onAPIServer(t *testing.T, c client.Client, f *casFixture) *casFixture {
	t.Helper()
	ctx := context.Background()
	emptyNamespace(t, c)
	objs := objectsOf(f.c)
	uids := map[types.UID]types.UID{}
	var pods []*corev1.Pod
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			pods = append(pods, p)
		}
	}
	slices.SortStableFunc(pods, func(a, b *corev1.Pod) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	for _, p := range pods {
		old, status := p.UID, p.Status
		p.ResourceVersion, p.UID = "", ""
		if len(p.Spec.Containers) == 0 {
			p.Spec.Containers = []corev1.Container{{Name: "app", Image: "app"}}
		}
		must(t, c.Create(ctx, p))
		p.Status = status
		must(t, c.Status().Update(ctx, p))
		uids[old] = p.UID
	}
	for _, o := range objs {
		switch o := o.(type) {
		case *fencingv1.FencedLease:
			fl := renamed(t, o, uids)
			status := fl.Status
			fl.ResourceVersion, fl.UID = "", ""
			must(t, c.Create(ctx, fl))
			fl.Status = status
			must(t, c.Status().Update(ctx, fl))
		case *coordinationv1.Lease:
			l := renamed(t, o, uids)
			l.ResourceVersion, l.UID = "", ""
			must(t, c.Create(ctx, l))
		}
	}
	clock := clocktesting.NewFakeClock(f.clock.Now())
	reader := &afterLeaseRead{Client: c}
	r := &Reconciler{Client: reader, apiReader: reader, clock: clock, metrics: NewMetrics(prometheus.NewRegistry()), pods: labeledPods{c}}
	r.grants = decision.NewGrantMemory(clock)
	r.uncached = newUncachedLeases()
	g := &casFixture{c: c, clock: clock, r: r, reader: reader}
	if len(f.r.grants.ByLease) > 0 {
		g.reconcile(t) // f's operator had seen the grants, at this time: so has g's
	}
	return g
}

// renamed is o with every pod UID it names replaced by the one the API server gave.
func renamed[T client.Object](t *testing.T, o T, uids map[types.UID]types.UID) T {
	t.Helper()
	raw, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	for old, now := range uids {
		text = strings.ReplaceAll(text, `"`+string(old)+`"`, `"`+string(now)+`"`)
	}
	out := o.DeepCopyObject().(T)
	if err := json.Unmarshal([]byte(text), out); err != nil {
		t.Fatal(err)
	}
	return out
}

// emptyNamespace deletes every FencedLease (its finalizer taken off), Lease and pod of the
// harness's namespace, and waits until they are gone.
func emptyNamespace(t *testing.T, c client.Client) {
	t.Helper()
	ctx := context.Background()
	in := client.InNamespace(key.Namespace)
	fls := &fencingv1.FencedLeaseList{}
	must(t, c.List(ctx, fls, in))
	for i := range fls.Items {
		fl := &fls.Items[i]
		if len(fl.Finalizers) > 0 {
			fl.Finalizers = nil
			must(t, client.IgnoreNotFound(c.Update(ctx, fl)))
		}
		must(t, client.IgnoreNotFound(c.Delete(ctx, fl)))
	}
	must(t, c.DeleteAllOf(ctx, &coordinationv1.Lease{}, in))
	must(t, c.DeleteAllOf(ctx, &corev1.Pod{}, in, client.GracePeriodSeconds(0)))
	for range 100 {
		pods, leases := &corev1.PodList{}, &coordinationv1.LeaseList{}
		must(t, c.List(ctx, pods, in))
		must(t, c.List(ctx, leases, in))
		must(t, c.List(ctx, fls, in))
		if len(pods.Items)+len(leases.Items)+len(fls.Items) == 0 {
			return
		}
		for i := range pods.Items {
			if p := &pods.Items[i]; len(p.Finalizers) > 0 {
				p.Finalizers = nil
				must(t, client.IgnoreNotFound(c.Update(ctx, p)))
			}
		}
		must(t, c.DeleteAllOf(ctx, &corev1.Pod{}, in, client.GracePeriodSeconds(0)))
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the harness's namespace did not empty")
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
