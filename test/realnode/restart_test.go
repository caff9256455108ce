package realnode

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// testNodeAgentRestarts: the kubelet, containerd, then both, restarted on the holder's
// node, each down for two leases. The containers keep running under their shims, the agent
// keeps renewing: the grant is kept (no revocation, same token), no container restarts,
// the workload is never stopped, and nobody else is granted.
func testNodeAgentRestarts(t *testing.T) {
	const ns, lease, leaseSeconds = "restarts", "restarts", 4
	newNamespace(t, ns)
	ctx := context.Background()
	must(t, rc.Client.Create(ctx, &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: lease},
		Spec: fencingv1.FencedLeaseSpec{LeaseDurationSeconds: leaseSeconds, StartupDeadlineSeconds: 60}}))
	grants, err := testenvWatch(ns)
	must(t, err)
	for _, name := range []string{"holder", "waiter"} {
		pod := workloadPod(ns, name, lease, corev1.Container{Name: "work", Command: []string{"/workload"}})
		pod.Annotations = map[string]string{fencingv1.AgentAnnotation: "true"}
		must(t, rc.Client.Create(ctx, pod))
		time.Sleep(50 * time.Millisecond) // holder is the older
	}
	reportedAt(t, ns, "holder", "work", "env=1 file=1", 90*time.Second)
	node := getPod(t, ns, "holder").Spec.NodeName
	restarts := func() []int32 {
		var n []int32
		p := getPod(t, ns, "holder")
		for _, s := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			n = append(n, s.RestartCount)
		}
		return n
	}
	before := restarts()
	down := 2 * leaseSeconds * time.Second
	steps := []struct {
		what string
		do   func() error
	}{
		{"kubelet", func() error {
			must(t, rc.StopKubelet(node))
			time.Sleep(down)
			return rc.StartKubelet(node)
		}},
		{"containerd", func() error {
			must(t, rc.RestartContainerd(node))
			time.Sleep(down)
			return nil
		}},
		{"kubelet and containerd", func() error {
			must(t, rc.StopKubelet(node))
			must(t, rc.RestartContainerd(node))
			time.Sleep(down)
			return rc.StartKubelet(node)
		}},
	}
	for i, s := range steps {
		must(t, s.do())
		must(t, rc.WaitForNodes(time.Minute))
		// A revocation the restart brought later would show by the next step's check,
		// two leases of its own down; after the last, two more leases with the node back.
		if i == len(steps)-1 {
			time.Sleep(down)
		}
		fl := getFencedLease(t, ns, lease)
		if fl.Status.Holder == nil || fl.Status.Holder.PodName != "holder" || fl.Status.Holder.Token != 1 || fl.Status.Revocations != 0 {
			t.Fatalf("after restarting %s on %s: want holder still holding token 1, no revocation; status %+v", s.what, node, fl.Status)
		}
		t.Logf("restarted %s on %s: holder keeps token 1", s.what, node)
	}
	if after := restarts(); !slices.Equal(before, after) {
		t.Errorf("container restart counts went from %v to %v", before, after)
	}
	if log := logs(t, ns, "holder", "work"); strings.Contains(log, "stopped") {
		t.Errorf("the workload was stopped:\n%s", log)
	}
	tokens, err := grants.Stop()
	if err != nil {
		t.Errorf("grant oracle: %v", err)
	}
	if !slices.Equal(tokens, []int64{1}) {
		t.Errorf("tokens granted %v, want only 1", tokens)
	}
}
