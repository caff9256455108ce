package realnode

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// testCandidatesWithoutTheOperator: with both operator replicas scaled to zero, the pods of
// a StatefulSet's replacement, a CronJob's run and a Deployment's rollout are still
// created — admitted by the API server alone — and wait gated, none started; when the
// operator is back they are granted oldest first, each in its turn, never two at once.
func testCandidatesWithoutTheOperator(t *testing.T) {
	const ns, lease = "no-operator", "outage"
	newNamespace(t, ns)
	ctx := context.Background()
	must(t, rc.Client.Create(ctx, &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: lease},
		Spec: fencingv1.FencedLeaseSpec{LeaseDurationSeconds: 10, StartupDeadlineSeconds: 120}}))
	grants, err := testenvWatch(ns)
	must(t, err)
	template := func(done bool) corev1.PodTemplateSpec {
		p := workloadPod(ns, "", lease, holdContainer("run"))
		if done { // a batch run: its time is up at once, so it ends as soon as it is granted
			p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "WORK_UNTIL", Value: "1"}}
		}
		return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{fencingv1.LeaseLabel: lease, "app": "outage"}}, Spec: p.Spec}
	}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sts"}, Spec: appsv1.StatefulSetSpec{
		Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "outage"}}, Template: template(false)}}
	must(t, rc.Client.Create(ctx, sts))
	reportedAt(t, ns, "sts-0", "run", "env=1 file=1", 2*time.Minute)

	scaleOperator(t, 0)
	t.Cleanup(func() { scaleOperator(t, 2) })
	first := getPod(t, ns, "sts-0").UID
	must(t, rc.Client.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sts-0"}}))
	var replacement *corev1.Pod
	if err := poll(time.Minute, func() bool {
		replacement = getPodOrNil(ns, "sts-0")
		return replacement != nil && replacement.UID != first
	}); err != nil {
		t.Fatalf("the StatefulSet did not replace its pod while the operator was down:\n%s", clusterState(ns))
	}
	time.Sleep(1100 * time.Millisecond) // creation times are in seconds: the replacement is the oldest
	run := template(true)
	run.Labels = map[string]string{fencingv1.LeaseLabel: lease}
	run.Spec.RestartPolicy = corev1.RestartPolicyNever
	jobTemplate := batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{BackoffLimit: ptr.To[int32](0), Template: run}}
	must(t, rc.Client.Create(ctx, &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cron"},
		Spec: batchv1.CronJobSpec{Schedule: "0 0 1 1 *", JobTemplate: jobTemplate}}))
	if out, err := kubectl("-n", ns, "create", "job", "cron-run", "--from=cronjob/cron"); err != nil {
		t.Fatalf("a run of the CronJob: %v\n%s", err, out)
	}
	time.Sleep(1100 * time.Millisecond) // creation times are in seconds: keep the order plain
	deploy := template(false)
	deploy.Labels = map[string]string{fencingv1.LeaseLabel: lease, "app": "web"}
	must(t, rc.Client.Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, Template: deploy}}))

	// Every candidate is there, admitted and gated, none started.
	var order []string
	if err := poll(time.Minute, func() bool {
		list := &corev1.PodList{}
		if rc.Client.List(ctx, list, clientNamespace(ns)) != nil || len(list.Items) != 3 {
			return false
		}
		order = nil
		for _, p := range list.Items {
			if p.Spec.NodeName != "" || p.Status.Phase != corev1.PodPending || p.Annotations[fencingv1.StateAnnotation] != "Waiting" ||
				len(p.Spec.SchedulingGates) != 1 || p.Spec.SchedulingGates[0].Name != fencingv1.SchedulingGate {
				return false
			}
			order = append(order, p.Name)
		}
		return true
	}); err != nil {
		t.Fatalf("want three candidates created, gated and waiting while the operator is down:\n%s", clusterState(ns))
	}
	t.Logf("created and gated with no operator running: %s", strings.Join(order, ", "))

	back := time.Now()
	scaleOperator(t, 2)
	// Oldest first: the StatefulSet's replacement (token 2), which works until stopped.
	at := reportedAt(t, ns, "sts-0", "run", "env=2 file=2", 3*time.Minute)
	measured("operator scaled back from zero → oldest waiting candidate at work", "%v", at.Sub(back).Round(10*time.Millisecond))
	// Scaled as a user scales it: the StatefulSet controller writes its status meanwhile.
	if out, err := kubectl("-n", ns, "scale", "statefulset/sts", "--replicas=0"); err != nil {
		t.Fatalf("scaling the StatefulSet to zero: %v\n%s", err, out)
	}
	// Then the CronJob's run (token 3), which ends at once, then the Deployment's pod (token 4).
	for i, prefix := range []string{"cron-run-", "web-"} {
		token := i + 3
		reportedAt(t, ns, podNamed(t, ns, prefix), "run", fmt.Sprintf("env=%d file=%d", token, token), 3*time.Minute)
	}
	if _, err := grants.Stop(); err != nil {
		t.Errorf("grant oracle: %v", err)
	}
}

// podNamed is the name of the one pod of ns whose name starts with prefix.
func podNamed(t *testing.T, ns, prefix string) string {
	t.Helper()
	list := &corev1.PodList{}
	must(t, rc.Client.List(context.Background(), list, clientNamespace(ns)))
	for _, p := range list.Items {
		if strings.HasPrefix(p.Name, prefix) {
			return p.Name
		}
	}
	t.Fatalf("no pod %s* in %s:\n%s", prefix, ns, clusterState(ns))
	return ""
}

// scaleOperator scales the operator's Deployment to replicas and waits until that many
// replicas run and are ready (none left, for 0).
func scaleOperator(t *testing.T, replicas int) {
	t.Helper()
	if out, err := kubectl("-n", operatorNamespace, "scale", "deployment", "fencedlease-controller-manager",
		fmt.Sprintf("--replicas=%d", replicas)); err != nil {
		t.Fatalf("scaling the operator to %d: %v\n%s", replicas, err, out)
	}
	ctx := context.Background()
	if err := poll(3*time.Minute, func() bool {
		pods := &corev1.PodList{}
		if rc.Client.List(ctx, pods, clientNamespace(operatorNamespace)) != nil {
			return false
		}
		ready, other := 0, 0
		for _, p := range pods.Items {
			if p.Labels["control-plane"] != "controller-manager" {
				continue
			}
			if p.DeletionTimestamp == nil && podReady(&p) {
				ready++
			} else {
				other++
			}
		}
		return ready == replicas && other == 0
	}); err != nil {
		t.Fatalf("the operator did not reach %d ready replicas:\n%s", replicas, clusterState(operatorNamespace))
	}
}

// testDrainBothOperatorNodes: `kubectl drain` of one operator node, then of the other, as
// a node upgrade goes. Candidates are created all along, every half second, and each is
// admitted gated at once: admission never waits for an operator replica. Their
// FencedLease is suspended through the drains (no holder to evict); resumed, the oldest
// is granted token 1.
func testDrainBothOperatorNodes(t *testing.T) {
	const ns, lease = "drain-operator", "created-throughout"
	newNamespace(t, ns)
	ctx := context.Background()
	must(t, rc.Client.Create(ctx, &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: lease},
		Spec: fencingv1.FencedLeaseSpec{LeaseDurationSeconds: 10, StartupDeadlineSeconds: 120, Suspend: true}}))
	grants, err := testenvWatch(ns)
	must(t, err)
	nodes := &corev1.NodeList{}
	must(t, rc.Client.List(ctx, nodes))
	stop := make(chan struct{})
	var once sync.Once
	halt := func() { once.Do(func() { close(stop) }) }
	t.Cleanup(halt) // a failed drain ends the creations too
	created := make(chan error, 1)
	var took []time.Duration
	go func() {
		var failed error
		took, failed = createCandidatesUntil(ns, lease, stop)
		created <- failed
	}()
	for _, n := range nodes.Items {
		start := time.Now()
		if out, err := kubectl("drain", n.Name, "--ignore-daemonsets", "--delete-emptydir-data", "--force", "--timeout=3m"); err != nil {
			t.Fatalf("kubectl drain %s: %v\n%s", n.Name, err, out)
		}
		drained := time.Since(start)
		if out, err := kubectl("uncordon", n.Name); err != nil {
			t.Fatalf("uncordon %s: %v\n%s", n.Name, err, out)
		}
		// The next drain may take the other replica only once this node runs one again.
		scaleOperator(t, 2)
		t.Logf("drained %s in %v, its operator replica back", n.Name, drained.Round(100*time.Millisecond))
	}
	halt()
	if err := <-created; err != nil {
		t.Fatal(err)
	}
	list := &corev1.PodList{}
	must(t, rc.Client.List(ctx, list, clientNamespace(ns)))
	slices.Sort(took)
	t.Logf("%d candidates created through both drains, none refused", len(list.Items))
	measured("candidate pod created during drains of both operator nodes", "%d pods, create call p50 %v, max %v",
		len(took), took[len(took)/2].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond))
	first := list.Items[0]
	for _, p := range list.Items {
		if p.CreationTimestamp.Before(&first.CreationTimestamp) {
			first = p
		}
	}
	fl := getFencedLease(t, ns, lease)
	fl.Spec.Suspend = false
	must(t, rc.Client.Update(ctx, fl))
	if h := recorded(t, ns, lease, first.Name, 1).Status.Holder; h == nil || h.PodName != first.Name || h.Token != 1 {
		t.Errorf("want the oldest candidate %s granted token 1 once resumed, holder %+v", first.Name, h)
	}
	if _, err := grants.Stop(); err != nil {
		t.Errorf("grant oracle: %v", err)
	}
}

// createCandidatesUntil creates a candidate of lease every half second until stop closes,
// and fails on the first that is refused, or stored without the gate; took is how long
// each create call took.
func createCandidatesUntil(ns, lease string, stop <-chan struct{}) (took []time.Duration, _ error) {
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-stop:
			return took, nil
		case <-tick.C:
		}
		p := workloadPod(ns, fmt.Sprintf("c-%03d", i), lease, holdContainer("run"))
		start := time.Now()
		if err := rc.Client.Create(context.Background(), p); err != nil {
			return took, fmt.Errorf("candidate %s refused during the drains: %w", p.Name, err)
		}
		took = append(took, time.Since(start))
		if len(p.Spec.SchedulingGates) == 0 {
			return took, fmt.Errorf("candidate %s stored without the gate", p.Name)
		}
	}
}
