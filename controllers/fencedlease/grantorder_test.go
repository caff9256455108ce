package fencedlease

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/controllers/fencedlease/internal/decision"
	"github.com/fencedlease/fencedlease/internal/grantorder"
)

// GrantOrder's first pod is the one decide grants when the grant ends: oldest first, and
// a hand-off's successor ahead of older pods.
func TestGrantOrderIsDecideOrder(t *testing.T) {
	c, tr, fl, pods, h := grantedRollout(10, 5) // a, b (older revision), n (newer)
	if got := names(grantorder.Queue(pods, nil, &fl.Status)); got != "b n" {
		t.Fatalf("before the hand-off: %q, want oldest first", got)
	}
	c.Step(time.Second)
	stepHandoff(tr, c, fl, leaseFor(h, t0.Add(time.Second)), pods, &pods[2])
	order := grantorder.Queue(pods, nil, &fl.Status)
	if got := names(order); got != "n b" {
		t.Fatalf("during the hand-off: %q, want the successor first", got)
	}
	released := leaseFor(h, t0.Add(time.Second))
	released.Spec.HolderIdentity = nil
	if d := stepHandoff(tr, c, fl, released, pods, nil); d.Granted() == nil || d.Granted().PodUID != order[0].UID {
		t.Fatalf("decide granted %+v, GrantOrder said %s", d.Granted(), order[0].Name)
	}
}

func names(pods []*corev1.Pod) string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return strings.Join(out, " ")
}

// warmOn is a Warm candidate bound to node, in phase.
func warmOn(name string, created time.Time, node string, phase corev1.PodPhase) corev1.Pod {
	p := warmPod(name, created)
	p.Spec.NodeName = node
	p.Status.Phase = phase
	return p
}

func node(name string, mod func(*corev1.Node)) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	if mod != nil {
		mod(&n)
	}
	return n
}

// Warm standbys that cannot take over now go behind the others, each part oldest first:
// on a node not Ready, unreachable or cordoned, or not running yet. A Cold candidate has
// no node yet and is never passed over.
func TestGrantOrderPassesOverStandbysThatCannotTakeOver(t *testing.T) {
	notReady := func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionUnknown }
	cordoned := func(n *corev1.Node) { n.Spec.Unschedulable = true }
	unreachable := func(n *corev1.Node) {
		n.Spec.Taints = []corev1.Taint{{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}}
	}
	nodes := []corev1.Node{node("lost", notReady), node("drained", cordoned), node("cut", unreachable), node("fine", nil)}
	pods := []corev1.Pod{
		warmOn("on-lost", t0, "lost", corev1.PodRunning),
		warmOn("on-drained", t0.Add(1*time.Second), "drained", corev1.PodRunning),
		warmOn("on-cut", t0.Add(2*time.Second), "cut", corev1.PodRunning),
		warmOn("starting", t0.Add(3*time.Second), "fine", corev1.PodPending),
		warmOn("healthy", t0.Add(4*time.Second), "fine", corev1.PodRunning),
		pod("cold", t0.Add(5*time.Second)),
	}
	st := &fencingv1.FencedLeaseStatus{}
	if got, want := names(grantorder.Queue(pods, nodes, st)), "healthy cold on-lost on-drained on-cut starting"; got != want {
		t.Fatalf("order %q, want %q", got, want)
	}
	// Without the nodes (a user who may not list them) only the start is known.
	if got, want := names(grantorder.Queue(pods, nil, st)), "on-lost on-drained on-cut healthy cold starting"; got != want {
		t.Fatalf("order without nodes %q, want %q", got, want)
	}
	// With nobody else, a standby on a lost node is still granted: the node may come back.
	if got := names(grantorder.Queue(pods[:1], nodes, st)); got != "on-lost" {
		t.Fatalf("order %q, want on-lost", got)
	}
}

// UnfitNodes is a nodeJudge over fixed verdicts.
type unfitNodes map[string]string

func (u unfitNodes) unfit(name string) string { return u[name] }

// The controller grants as GrantOrder shows: the older standby on a lost node waits, the
// healthy one is granted, with a confirmation bound of two leases (at least
// WarmConfirmFloor), not the startup deadline.
func TestGrantPassesOverAStandbyOnALostNode(t *testing.T) {
	c := clocktesting.NewFakeClock(t0.Add(10 * time.Second))
	fl := newFL(4)
	fl.Spec.StartupDeadlineSeconds = 300
	pods := []corev1.Pod{warmOn("on-lost", t0, "lost", corev1.PodRunning), warmOn("healthy", t0.Add(time.Second), "fine", corev1.PodRunning)}
	var objs []client.Object
	for i := range pods {
		objs = append(objs, pods[i].DeepCopy())
	}
	api := fake.NewClientBuilder().WithScheme(NewScheme()).WithObjects(objs...).Build()
	r := &Reconciler{Client: api, apiReader: api, clock: c, pods: labeledPods{api}, grants: decision.NewGrantMemory(c),
		nodes: unfitNodes{"lost": "node lost is not Ready (Unknown)"}}
	w, err := r.observe(context.Background(), fl, true)
	if err != nil {
		t.Fatal(err)
	}
	d := decision.Decide(w)
	g := d.Granted()
	if g == nil || g.PodName != "healthy" {
		t.Fatalf("want healthy granted, got %+v", g)
	}
	if g.StartupDeadlineSeconds != decision.WarmConfirmFloor {
		t.Fatalf("a running Warm standby's confirmation bound is %d s, want %d (2 × 4 s lease, floored)", g.StartupDeadlineSeconds, decision.WarmConfirmFloor)
	}
	fl.Spec.LeaseDurationSeconds = 30
	if s := decision.StartupSecondsFor(fl, &pods[1]); s != 60 {
		t.Fatalf("30 s lease: bound %d, want 60", s)
	}
	if s := decision.StartupSecondsFor(fl, &corev1.Pod{}); s != 300 {
		t.Fatalf("a Cold pod keeps the startup deadline: %d, want 300", s)
	}
	fl.Spec.StartupDeadlineSeconds = 20
	if s := decision.StartupSecondsFor(fl, &pods[1]); s != 20 {
		t.Fatalf("a shorter startup deadline wins: %d, want 20", s)
	}
}

// A holder whose lease ran out may have gone with its node — its kubelet and every
// container on it — long before the node controller calls the node NotReady (40 s by
// default): in the pass that revokes it, the standbys on its node go behind the others.
// Measured on real nodes before: a machine that died took up to two of its own standbys
// through their confirmation bounds, 28 s from the last renewal to work on a 5 s lease.
func TestAStandbyOnTheNodeOfAHolderThatWentSilentIsPassedOver(t *testing.T) {
	for _, tc := range []struct {
		name       string
		renewed    bool
		wantReason fencingv1.RevocationReason
	}{
		{"its lease ran out", true, fencingv1.ReasonLeaseExpired},
		{"it never confirmed", false, fencingv1.ReasonStartupDeadlineExceeded},
	} {
		c := clocktesting.NewFakeClock(t0)
		tr := decision.NewGrantMemory(c)
		fl := newFL(4)
		fl.Spec.StartupDeadlineSeconds = 8
		pods := []corev1.Pod{warmOn("holder", t0, "gone", corev1.PodRunning),
			warmOn("old", t0.Add(time.Second), "gone", corev1.PodRunning),
			warmOn("young", t0.Add(2*time.Second), "fine", corev1.PodRunning)}
		h := step(tr, c, fl, nil, pods).Granted()
		if h == nil || h.PodName != "holder" {
			t.Fatalf("%s: want holder granted first, got %+v", tc.name, h)
		}
		c.Step(time.Second)
		lease := leaseFor(h, t0)
		if tc.renewed {
			lease = leaseFor(h, c.Now())
		}
		step(tr, c, fl, lease, pods)
		c.Step(20 * time.Second) // past the lease and the confirmation bound
		d := step(tr, c, fl, lease, pods)
		if rv := d.Revoked(); rv == nil || rv.Reason != tc.wantReason {
			t.Fatalf("%s: want the holder revoked as %s, got %+v", tc.name, tc.wantReason, rv)
		}
		if g := d.Granted(); g == nil || g.PodName != "young" {
			t.Fatalf("%s: want young (on another node) granted before old (on the silent holder's node), got %+v", tc.name, g)
		}
	}
}
