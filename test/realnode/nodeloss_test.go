package realnode

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// testNodeLost: the partition case. The holder's node loses the control
// plane — its kubelet stops, its pod's packets to the API server are dropped — while the
// holder's container keeps running and writing to PostgreSQL through the SQL fence, never
// checking its grant (WRITE_ALWAYS). The operator revokes one lease after the last
// renewal and grants the pod on the other node token 2; once token 2 wrote, the fence
// refuses every write of token 1. The node comes back: the revoked pod, deleted while its
// kubelet was away, is killed and gone; nothing was granted twice.
//
// The machine-dies variant: kubelet, containerd and every container of the node killed at
// once; nothing writes any more; the rest is the same.
func testNodeLost(t *testing.T) {
	t.Run("partition, containers running", func(t *testing.T) { nodeLost(t, "nodeloss", false) })
	t.Run("the machine dies", func(t *testing.T) { nodeLost(t, "nodedies", true) })
}

func nodeLost(t *testing.T, ns string, dies bool) {
	const lease, leaseSeconds = "writer", 4
	newNamespace(t, ns)
	ctx := context.Background()
	must(t, rc.Client.Create(ctx, &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: lease},
		Spec: fencingv1.FencedLeaseSpec{LeaseDurationSeconds: leaseSeconds, StartupDeadlineSeconds: 60}}))
	grants, err := testenvWatch(ns)
	must(t, err)
	dsn, db := fencedDatabase(t, ns)
	lost, healthy := rc.Nodes[0], rc.Nodes[1]
	for _, w := range []struct{ name, node string }{{"writer-1", lost}, {"writer-2", healthy}} {
		pod := workloadPod(ns, w.name, lease, corev1.Container{Name: "work", Command: []string{"/workload"},
			Env: []corev1.EnvVar{{Name: "LEDGER_DSN", Value: dsn}, {Name: "WRITE_ALWAYS", Value: "1"}}})
		pod.Annotations = map[string]string{fencingv1.AgentAnnotation: "true"}
		pod.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": w.node}
		must(t, rc.Client.Create(ctx, pod))
		time.Sleep(50 * time.Millisecond) // writer-1 is the older
	}
	reportedAt(t, ns, "writer-1", "work", "wrote token 1", 90*time.Second)
	renewals := followRenewals(ns, lease, "writer-1")
	back := func() error { return rc.StartKubelet(lost) }
	if dies {
		must(t, rc.KillNode(lost))
		back = func() error { return rc.StartNode(lost) }
	} else {
		must(t, rc.CutFromAPIServer(startedPod(t, ns, "writer-1", "work"), "work"))
		must(t, rc.StopKubelet(lost))
	}
	cut := time.Now()
	nodeDown := true
	t.Cleanup(func() {
		if nodeDown {
			_ = back()
		}
	})
	firstWrite2 := reportedAt(t, ns, "writer-2", "work", "wrote token 2", 90*time.Second)
	last := <-renewals
	// In a partition writer-1 still runs and writes: refused from token 2's first write on.
	var rejected time.Time
	if !dies {
		rejected = reportedAtNoLog(t, ns, "writer-1", "REJECTED token 1", 30*time.Second)
	}
	tokens := fencedWrites(t, db)
	if len(tokens) < 2 || tokens[0] != 1 || tokens[len(tokens)-1] != 2 {
		t.Errorf("accepted tokens %v, want token 1's writes then token 2's only", tokens)
	}
	rv := revocationRecorded(t, ns, lease, 1)
	if rv == nil || rv.PodName != "writer-1" || rv.Reason != fencingv1.ReasonLeaseExpired {
		t.Errorf("want writer-1 revoked as LeaseExpired; got %+v", rv)
	} else if rv.Time.Sub(last) < leaseSeconds*time.Second {
		t.Errorf("writer-1 revoked %v after its last renewal, before its lease of %d s ran out", rv.Time.Sub(last), leaseSeconds)
	}
	if dies {
		measured("the holder's machine dies: last renewal → revoked → token 2's first write",
			"%v → %v (killed %v after the last renewal)", rv.Time.Sub(last).Round(10*time.Millisecond),
			firstWrite2.Sub(last).Round(10*time.Millisecond), cut.Sub(last).Round(10*time.Millisecond))
	} else {
		measured("node lost, containers running (partition): last renewal → revoked → token 2's first write; token 1 refused",
			"%v → %v; the zombie's first refused write %v after token 2's first (cut %v after the last renewal)",
			rv.Time.Sub(last).Round(10*time.Millisecond), firstWrite2.Sub(last).Round(10*time.Millisecond),
			rejected.Sub(firstWrite2).Round(10*time.Millisecond), cut.Sub(last).Round(10*time.Millisecond))
	}

	// The node comes back: the revoked pod was deleted (DeletePod) while its kubelet was
	// away; the kubelet kills it (or finds it dead) and it is gone.
	must(t, back())
	nodeDown = false
	must(t, rc.WaitForNodes(2*time.Minute))
	if err := poll(2*time.Minute, func() bool { return getPodOrNil(ns, "writer-1") == nil }); err != nil {
		t.Errorf("writer-1 was not cleaned up after its node came back:\n%s", describe(getPod(t, ns, "writer-1")))
	}
	if fl := getFencedLease(t, ns, lease); fl.Status.Holder == nil || fl.Status.Holder.PodName != "writer-2" || fl.Status.Holder.Token != 2 {
		t.Errorf("after the node came back: want writer-2 still holding token 2; status %+v", fl.Status)
	}
	if _, err := grants.Stop(); err != nil {
		t.Errorf("grant oracle: %v", err)
	}
}

// reportedAtNoLog is reportedAt for a pod whose logs the API server cannot fetch (its
// kubelet is down): it reads the container's log file on the node.
func reportedAtNoLog(t *testing.T, ns, pod, want string, timeout time.Duration) time.Time {
	t.Helper()
	var at time.Time
	err := poll(timeout, func() bool {
		raw, err := rc.ContainerLog(getPod(t, ns, pod), "work")
		if err != nil {
			return false
		}
		for _, line := range strings.Split(raw, "\n") {
			if m := reportLine.FindStringSubmatch(line); m != nil && m[2] == want {
				n, _ := strconv.ParseInt(m[1], 10, 64)
				at = time.Unix(0, n)
				return true
			}
		}
		return false
	})
	if err != nil {
		t.Fatalf("%s never logged %q within %v", pod, want, timeout)
	}
	return at
}

// testWarmStandbyOnLostNode: the oldest Warm standby runs on a node that loses the
// control plane (kubelet stopped, the pod's packets to the API server dropped) while the
// holder, on the other node with the younger standby, is cut off from the API server. The
// node controller has not called the lost node NotReady yet (its grace period outlasts
// the lease), and the younger standby shares the silent holder's node (so it goes last),
// so the grant goes to the oldest standby, which cannot confirm it: it is revoked after
// the confirmation bound of a running Warm standby (two leases, at least 10 s), not the
// startup deadline (120 s here), and the younger standby takes over.
func testWarmStandbyOnLostNode(t *testing.T) {
	const ns, lease, leaseSeconds, startupSeconds = "warmloss", "leader", 4, 120
	newNamespace(t, ns)
	ctx := context.Background()
	must(t, rc.Client.Create(ctx, &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: lease},
		Spec: fencingv1.FencedLeaseSpec{LeaseDurationSeconds: leaseSeconds, StartupDeadlineSeconds: startupSeconds, Standby: fencingv1.StandbyWarm}}))
	grants, err := testenvWatch(ns)
	must(t, err)
	lost, healthy := rc.Nodes[0], rc.Nodes[1]
	warmTrio(t, ns, lease, healthy, lost, healthy)
	renewals := followRenewals(ns, lease, "holder")
	for _, name := range []string{"holder", "standby-old"} {
		must(t, rc.CutFromAPIServer(startedPod(t, ns, name, "work"), "work"))
	}
	must(t, rc.StopKubelet(lost))
	kubeletDown := true
	t.Cleanup(func() {
		if kubeletDown {
			_ = rc.StartKubelet(lost)
		}
	})
	working := loggedWithPrefix(t, ns, "standby-young", "env=3 ", startupSeconds*time.Second)
	last := <-renewals
	rv := recorded(t, ns, lease, "standby-young", 3).Status.LastRevocation
	if rv == nil || rv.PodName != "standby-old" || rv.Token != 2 || rv.Reason != fencingv1.ReasonStartupDeadlineExceeded {
		t.Errorf("want standby-old's token 2 revoked as StartupDeadlineExceeded (it could not confirm); got %+v", rv)
	}
	bound := max(2*leaseSeconds, 10) * time.Second
	if took := working.Sub(last); took > leaseSeconds*time.Second+bound+15*time.Second {
		t.Errorf("standby-young worked %v after the holder's last renewal: the lost standby was kept longer than its confirmation bound (%v)", took, bound)
	}
	measured("Warm standby on the lost node, granted first: holder's last renewal → younger standby at work",
		"%v (lease %d s + the lost standby's confirmation bound %v; startup deadline %d s)",
		working.Sub(last).Round(10*time.Millisecond), leaseSeconds, bound, startupSeconds)
	must(t, rc.StartKubelet(lost))
	kubeletDown = false
	must(t, rc.WaitForNodes(2*time.Minute))
	if _, err := grants.Stop(); err != nil {
		t.Errorf("grant oracle: %v", err)
	}
}

// testMachineDiesWithItsStandby: a Warm holder and the oldest Warm standby run on a node
// whose machine dies (kubelet, containerd and every container killed); a younger standby
// runs on the other node, with the operator's leader. The node still counts as Ready for
// the node controller's grace period, but the pass that revokes the silent holder passes
// over the standbys on its node:
// token 2 goes to the younger standby, not to the dead one, which would cost a
// confirmation bound (10 s) before anyone worked.
func testMachineDiesWithItsStandby(t *testing.T) {
	const ns, lease, leaseSeconds = "machinedies", "leader", 4
	newNamespace(t, ns)
	ctx := context.Background()
	must(t, rc.Client.Create(ctx, &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: lease},
		Spec: fencingv1.FencedLeaseSpec{LeaseDurationSeconds: leaseSeconds, StartupDeadlineSeconds: 120, Standby: fencingv1.StandbyWarm}}))
	grants, err := testenvWatch(ns)
	must(t, err)
	// The machine that dies is not the operator leader's: a leader failover (its lease)
	// would outlast the node controller's grace period and hide what is measured here.
	dies, healthy := rc.Nodes[0], rc.Nodes[1]
	if operatorLeaderOn(t, dies) {
		dies, healthy = healthy, dies
	}
	warmTrio(t, ns, lease, dies, dies, healthy)
	renewals := followRenewals(ns, lease, "holder")
	leaderDies := operatorLeaderOn(t, dies)
	must(t, rc.KillNode(dies))
	nodeDown := true
	t.Cleanup(func() {
		if nodeDown {
			_ = rc.StartNode(dies)
		}
	})
	working := loggedWithPrefix(t, ns, "standby-young", "env=", 2*time.Minute)
	last := <-renewals
	fl := recorded(t, ns, lease, "standby-young", 2)
	if h := fl.Status.Holder; h == nil || h.PodName != "standby-young" || h.Token != 2 {
		t.Errorf("want standby-young granted token 2, before the dead node's standby; status %+v", fl.Status)
	}
	if rv := fl.Status.LastRevocation; rv == nil || rv.PodName != "holder" || rv.Reason != fencingv1.ReasonLeaseExpired {
		t.Errorf("want the holder's token 1 revoked as LeaseExpired, the last revocation; got %+v", rv)
	}
	measured("a Warm holder's machine dies with its older standby: last renewal → the other node's standby at work",
		"%v (lease %d s; the operator's leader died with it: %v)", working.Sub(last).Round(10*time.Millisecond), leaseSeconds, leaderDies)
	must(t, rc.StartNode(dies))
	nodeDown = false
	must(t, rc.WaitForNodes(2*time.Minute))
	if _, err := grants.Stop(); err != nil {
		t.Errorf("grant oracle: %v", err)
	}
}

// operatorLeaderOn: the operator replica that leads runs on node.
func operatorLeaderOn(t *testing.T, node string) bool {
	l, err := clientset(t).CoordinationV1().Leases(operatorNamespace).Get(context.Background(), "fencedlease-operator", metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return false
	}
	list := &corev1.PodList{}
	must(t, rc.Client.List(context.Background(), list, clientNamespace(operatorNamespace)))
	for _, p := range list.Items {
		if strings.HasPrefix(*l.Spec.HolderIdentity, p.Name) {
			return p.Spec.NodeName == node
		}
	}
	return false
}

// warmTrio creates, in this order, the Warm pods holder, standby-old and standby-young
// under hold on the nodes given, and waits until the holder works and both standbys run.
func warmTrio(t *testing.T, ns, lease, holderNode, oldNode, youngNode string) {
	t.Helper()
	for _, w := range []struct{ name, node string }{{"holder", holderNode}, {"standby-old", oldNode}, {"standby-young", youngNode}} {
		pod := workloadPod(ns, w.name, lease, holdContainer("work"))
		pod.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": w.node}
		must(t, rc.Client.Create(context.Background(), pod))
		time.Sleep(1100 * time.Millisecond) // creation times count in seconds: the order is the list's
	}
	reportedAt(t, ns, "holder", "work", "env=1 file=1", 90*time.Second)
	for _, name := range []string{"standby-old", "standby-young"} {
		if err := poll(90*time.Second, func() bool { p := getPodOrNil(ns, name); return p != nil && p.Status.Phase == corev1.PodRunning }); err != nil {
			t.Fatalf("%s never ran", name)
		}
	}
}
