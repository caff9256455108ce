package realnode

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// testDrain: `kubectl drain` of the holder's node, as an operator does before maintenance.
// A Warm Deployment of two replicas under hold, one a node, with a PodDisruptionBudget of
// minAvailable 1; the operator's two replicas and its PDB. The drain evicts the holder
// (its PDB allows it: the standby is Ready), hold stops the command and releases, the
// standby on the other node is granted token 2 and works; the operator's PDB keeps one
// replica; the drain completes. The gap from the old command's stop to the new one's start
// is measured.
func testDrain(t *testing.T) {
	const ns, lease, leaseSeconds = "drain", "leader", 4
	newNamespace(t, ns)
	ctx := context.Background()
	must(t, rc.Client.Create(ctx, &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: lease},
		Spec: fencingv1.FencedLeaseSpec{LeaseDurationSeconds: leaseSeconds, StartupDeadlineSeconds: 60, Standby: fencingv1.StandbyWarm}}))
	grants, err := testenvWatch(ns)
	must(t, err)
	template := workloadPod(ns, "", lease, holdContainer("work"))
	labels := map[string]string{"app": "leader"}
	template.Labels["app"] = "leader"
	template.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: labels}, TopologyKey: "kubernetes.io/hostname"}}}}
	must(t, rc.Client.Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "leader"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: template.ObjectMeta, Spec: template.Spec}}}))
	must(t, rc.Client.Create(ctx, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "leader"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: labels}}}))

	var holder, standby string
	if err := poll(2*time.Minute, func() bool {
		fl := getFencedLease(t, ns, lease)
		list := &corev1.PodList{}
		if fl.Status.Holder == nil || fl.Status.Holder.FirstRenewTime == nil || rc.Client.List(ctx, list, clientNamespace(ns)) != nil {
			return false
		}
		holder, standby = fl.Status.Holder.PodName, ""
		for _, p := range list.Items {
			if p.Name != holder && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				standby = p.Name
			}
		}
		return standby != ""
	}); err != nil {
		t.Fatalf("no holder with a running standby: %+v", getFencedLease(t, ns, lease).Status)
	}
	reportedAt(t, ns, holder, "work", "env=1 file=1", time.Minute)
	node := getPod(t, ns, holder).Spec.NodeName
	t.Cleanup(func() { _, _ = kubectl("uncordon", node) })

	started := time.Now()
	out, err := kubectl("drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--force", "--timeout=3m")
	if err != nil {
		t.Fatalf("kubectl drain %s: %v\n%s", node, err, out)
	}
	drained := time.Since(started)
	if !strings.Contains(out, "evicting pod "+ns+"/"+holder) {
		t.Errorf("the drain did not evict the holder %s:\n%s", holder, out)
	}
	working := loggedWithPrefix(t, ns, standby, "env=2 ", time.Minute)
	if fl := getFencedLease(t, ns, lease); fl.Status.Revocations != 0 {
		t.Errorf("the drain cost a revocation, where the holder should have released: %+v", fl.Status.LastRevocation)
	}
	// The operator: at least one replica ran throughout (its PDB), and one leads.
	d := &appsv1.Deployment{}
	must(t, rc.Client.Get(ctx, clientKey(operatorNamespace, operatorDeployment), d))
	if d.Status.AvailableReplicas < 1 {
		t.Errorf("the operator has no available replica after the drain: %+v", d.Status)
	}
	measured("kubectl drain of the Warm holder's node: drain took; holder evicted → standby at work (token 2)",
		"%v; %v after the drain began (lease %d s)", drained.Round(100*time.Millisecond), working.Sub(started).Round(10*time.Millisecond), leaseSeconds)
	if _, err := kubectl("uncordon", node); err != nil {
		t.Errorf("uncordon %s: %v", node, err)
	}
	// The operator back at two replicas before the next spec.
	if out, err := kubectl("-n", operatorNamespace, "rollout", "status", "deployment/"+operatorDeployment, "--timeout=300s"); err != nil {
		t.Errorf("the operator did not come back to two replicas: %v\n%s", err, out)
	}
	if _, err := grants.Stop(); err != nil {
		t.Errorf("grant oracle: %v", err)
	}
}
