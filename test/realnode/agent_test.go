package realnode

import (
	"context"
	"regexp"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// workloadPod is a candidate pod of lease running the suite's workload image.
func workloadPod(ns, name, lease string, containers ...corev1.Container) *corev1.Pod {
	for i := range containers {
		containers[i].Image = workloadImage + ":dev"
		containers[i].SecurityContext = &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true)}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{fencingv1.LeaseLabel: lease}},
		Spec: corev1.PodSpec{ServiceAccountName: "worker", TerminationGracePeriodSeconds: ptr.To[int64](5),
			Containers: containers},
	}
}

// holdContainer runs the workload under `fencedlease-agent hold`.
func holdContainer(name string) corev1.Container {
	return corev1.Container{Name: name, Command: []string{"/fencedlease-agent", "hold", "--", "/workload"}}
}

var reportLine = regexp.MustCompile(`T=(\d+) (.*)`)

// reportedAt is when a workload container first printed want (its own clock, the machine's).
func reportedAt(t *testing.T, ns, pod, container, want string, timeout time.Duration) time.Time {
	t.Helper()
	var at time.Time
	err := poll(timeout, func() bool {
		for _, m := range reportLine.FindAllStringSubmatch(logs(t, ns, pod, container), -1) {
			if m[2] == want {
				n, _ := strconv.ParseInt(m[1], 10, 64)
				at = time.Unix(0, n)
				return true
			}
		}
		return false
	})
	if err != nil {
		t.Fatalf("%s/%s never reported %q within %v; its log:\n%s", pod, container, want, timeout, logs(t, ns, pod, container))
	}
	return at
}

// grantedAt is the time of the Granted event of pod (microseconds, the operator's clock).
func grantedAt(t *testing.T, ns, pod string) time.Time {
	t.Helper()
	var at time.Time
	err := poll(30*time.Second, func() bool {
		evs, err := clientset(t).EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, e := range evs.Items {
			if e.Reason == "Granted" && e.Regarding.Name == pod {
				at = e.EventTime.Time
				return true
			}
		}
		return false
	})
	if err != nil {
		t.Fatalf("no Granted event for %s", pod)
	}
	return at
}

// testAgentSidecar: the webhook injects the agent as a native sidecar; the kubelet starts
// it before the workload, whose start its startupProbe holds back until the grant renewed;
// the token reaches the workload by env and by the downward-API file.
func testAgentSidecar(t *testing.T) {
	const ns, lease = "agent", "agent"
	newNamespace(t, ns)
	ctx := context.Background()
	must(t, rc.Client.Create(ctx, &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: lease},
		Spec: fencingv1.FencedLeaseSpec{LeaseDurationSeconds: 4, StartupDeadlineSeconds: 60}}))
	pod := workloadPod(ns, "worker", lease, corev1.Container{Name: "work", Command: []string{"/workload"}})
	pod.Annotations = map[string]string{fencingv1.AgentAnnotation: "true"}
	created := time.Now()
	must(t, rc.Client.Create(ctx, pod))
	reportedAt(t, ns, "worker", "work", "env=1 file=1", 90*time.Second)
	// The container's log can come before the kubelet's status update that says it runs.
	var p *corev1.Pod
	_ = poll(10*time.Second, func() bool {
		p = getPod(t, ns, "worker")
		return len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].State.Running != nil
	})
	if len(p.Spec.InitContainers) != 1 || p.Spec.InitContainers[0].Name != fencingv1.AgentContainerName ||
		p.Spec.InitContainers[0].RestartPolicy == nil || *p.Spec.InitContainers[0].RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Fatalf("want the agent as the one native sidecar; init containers %+v", p.Spec.InitContainers)
	}
	var agentStarted, workStarted time.Time
	for _, s := range p.Status.InitContainerStatuses {
		if s.State.Running != nil && s.Started != nil && *s.Started {
			agentStarted = s.State.Running.StartedAt.Time
		}
	}
	for _, s := range p.Status.ContainerStatuses {
		if s.State.Running != nil {
			workStarted = s.State.Running.StartedAt.Time
		}
	}
	if agentStarted.IsZero() || workStarted.IsZero() || workStarted.Before(agentStarted) {
		t.Errorf("the agent must run, started, before the workload: agent %v, workload %v\n%s", agentStarted, workStarted, describe(p))
	}
	if fl := getFencedLease(t, ns, lease); fl.Status.Holder != nil && fl.Status.Holder.FirstRenewTime != nil {
		measured("Cold pod with the agent: create → first renewal", "%v (grant %v, then scheduling, pull, sidecar start)",
			fl.Status.Holder.FirstRenewTime.Sub(created).Round(10*time.Millisecond), fl.Status.Holder.AcquireTime.Sub(created).Round(10*time.Millisecond))
	}
	// The agent renews: the Lease is renewed for longer than its duration.
	time.Sleep(6 * time.Second)
	fl := &fencingv1.FencedLease{}
	must(t, rc.Client.Get(ctx, clientKey(ns, lease), fl))
	if fl.Status.Holder == nil || fl.Status.Holder.PodName != "worker" || fl.Status.Revocations != 0 {
		t.Errorf("the agent's pod should still hold after 1.5 leases; status %+v", fl.Status)
	}
	t.Logf("pod created %v; agent started %v; workload started %v (second precision)",
		p.CreationTimestamp.Format(time.TimeOnly), agentStarted.Format(time.TimeOnly), workStarted.Format(time.TimeOnly))
}

// testWarmHold: a Warm pod's workload runs under hold, a second container watches the
// downward-API file. hold runs its command only once granted, with the token in its
// environment; when its grant is revoked, it stops the command before the next pod is
// granted; the kubelet refreshes the file some time after the grant (measured, logged).
func testWarmHold(t *testing.T) {
	const ns, lease = "warm", "warm"
	newNamespace(t, ns)
	ctx := context.Background()
	must(t, rc.Client.Create(ctx, &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: lease},
		Spec: fencingv1.FencedLeaseSpec{LeaseDurationSeconds: 4, StartupDeadlineSeconds: 60, Standby: fencingv1.StandbyWarm}}))
	grants, err := testenvWatch(ns)
	must(t, err)
	var created time.Time
	for _, name := range []string{"warm-1", "warm-2"} {
		created = time.Now()
		must(t, rc.Client.Create(ctx, workloadPod(ns, name, lease, holdContainer("held"), corev1.Container{Name: "watch", Command: []string{"/workload"}})))
		time.Sleep(50 * time.Millisecond) // warm-1 is the older
	}
	// Admitted gated like any candidate, let run by the operator (W1).
	if err := poll(30*time.Second, func() bool { p := getPodOrNil(ns, "warm-2"); return p != nil && len(p.Spec.SchedulingGates) == 0 }); err != nil {
		t.Fatalf("the operator did not let warm-2 run:\n%s", clusterState(ns))
	}
	letRun := time.Since(created)
	reportedAt(t, ns, "warm-1", "held", "env=1 file=1", 90*time.Second)
	running := reportedAt(t, ns, "warm-2", "watch", "env= file=", 90*time.Second) // running, waiting
	measured("Warm standby: pod created → gate removed by the operator", "%v (polled)", letRun.Round(10*time.Millisecond))
	measured("Warm standby: pod created → its workload running, waiting", "%v", running.Sub(created).Round(10*time.Millisecond))
	if out, err := runProgram(program("kubectl-fencedlease"), "revoke", lease, "-n", ns, "--kubeconfig", rc.Kubeconfig); err != nil {
		t.Fatalf("kubectl fencedlease revoke: %v\n%s", err, out)
	}
	stopped := reportedAt(t, ns, "warm-1", "held", "stopped", 60*time.Second)
	reportedAt(t, ns, "warm-2", "held", "env=2 file=2", 90*time.Second)
	granted := grantedAt(t, ns, "warm-2")
	if !stopped.Before(granted) {
		t.Errorf("hold stopped warm-1's command at %v, not before warm-2 was granted at %v", stopped, granted)
	}
	file := reportedAt(t, ns, "warm-2", "watch", "env= file=2", 3*time.Minute)
	measured("downward-API file /etc/fencing/token after a grant", "%v after the Granted event", file.Sub(granted).Round(time.Millisecond))
	measured("hold stops its command before the next grant", "%v before", granted.Sub(stopped).Round(time.Millisecond))
	t.Logf("hold stopped the revoked command %v before the next grant; the downward-API file showed the token %v after the Granted event",
		granted.Sub(stopped).Round(time.Millisecond), file.Sub(granted).Round(time.Millisecond))
	if _, err := grants.Stop(); err != nil {
		t.Errorf("grant oracle: %v", err)
	}
}
