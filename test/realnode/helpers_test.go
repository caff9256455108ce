package realnode

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/test/testenv"
)

// newNamespace creates a namespace for one spec, with a service account bound to the
// holder role as the README tells users, and prints the cluster's state if the spec fails.
func newNamespace(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	must(t, rc.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}))
	t.Cleanup(func() {
		// Its pods at once, not after their grace period: the specs that disturb a node
		// or the operator wait until no namespace is terminating (settle).
		_ = rc.Client.DeleteAllOf(context.Background(), &corev1.Pod{}, client.InNamespace(name), client.GracePeriodSeconds(0))
		_ = rc.Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	})
	printStateOnFailure(t, name)
	must(t, rc.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: "worker"}}))
	must(t, rc.Client.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: "worker-holder"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "fencedlease-holder-role"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "worker", Namespace: name}},
	}))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func clientset(t *testing.T) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(rc.Config)
	must(t, err)
	return cs
}

func getPod(t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{}
	must(t, rc.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, p))
	return p
}

// logs is a container's log so far ("" while it has not started).
func logs(t *testing.T, ns, pod, container string) string {
	raw, err := clientset(t).CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: container}).DoRaw(context.Background())
	if err != nil {
		return ""
	}
	return string(raw)
}

// waitForLog waits until a container's log holds want, and returns the time it saw it.
func waitForLog(t *testing.T, ns, pod, container, want string, timeout time.Duration) time.Time {
	t.Helper()
	var seen time.Time
	err := poll(timeout, func() bool {
		if strings.Contains(logs(t, ns, pod, container), want) {
			seen = time.Now()
			return true
		}
		return false
	})
	if err != nil {
		t.Fatalf("%s/%s's log never said %q within %v; it holds:\n%s", pod, container, want, timeout, logs(t, ns, pod, container))
	}
	return seen
}

// startedPod is pod name once its status names container running: a container's log can
// show it at work before the kubelet's next status update says it runs.
func startedPod(t *testing.T, ns, name, container string) *corev1.Pod {
	t.Helper()
	var p *corev1.Pod
	if err := poll(30*time.Second, func() bool {
		if p = getPodOrNil(ns, name); p == nil {
			return false
		}
		for _, s := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
			if s.Name == container && s.State.Running != nil && s.ContainerID != "" {
				return true
			}
		}
		return false
	}); err != nil {
		t.Fatalf("pod %s/%s: the kubelet never reported container %s running:\n%s", ns, name, container, clusterState(ns))
	}
	return p
}

// poll checks cond every 100 ms until it holds or timeout passes.
func poll(timeout time.Duration, cond func() bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) { return cond(), nil })
}

// terminated is a container's exit code once it has ended.
func terminated(p *corev1.Pod, container string) (int32, bool) {
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == container && s.State.Terminated != nil {
			return s.State.Terminated.ExitCode, true
		}
	}
	return 0, false
}

func describe(p *corev1.Pod) string {
	return fmt.Sprintf("%s on %s: phase %s, annotations %v, containers %+v", p.Name, p.Spec.NodeName, p.Status.Phase, p.Annotations, p.Status.ContainerStatuses)
}

// runProgram runs a program and returns what it printed.
func runProgram(bin string, args ...string) (string, error) {
	out, err := exec.Command(bin, args...).CombinedOutput()
	return string(out), err
}

func clientKey(ns, name string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: name} }

func testenvWatch(ns string) (*testenv.GrantWatcher, error) {
	return testenv.WatchGrants(context.Background(), rc.Client, ns)
}

// getPodOrNil is the pod, or nil once it is gone.
func getPodOrNil(ns, name string) *corev1.Pod {
	p := &corev1.Pod{}
	if rc.Client.Get(context.Background(), clientKey(ns, name), p) != nil {
		return nil
	}
	return p
}

func clientNamespace(ns string) client.InNamespace { return client.InNamespace(ns) }

func getFencedLease(t *testing.T, ns, name string) *fencingv1.FencedLease {
	t.Helper()
	fl := &fencingv1.FencedLease{}
	must(t, rc.Client.Get(context.Background(), clientKey(ns, name), fl))
	return fl
}

// recorded is the FencedLease once its status names pod holding token, or as it is after
// 10 s. A Warm standby starts on the Lease's hand-over, at once; the status records it
// with its first renewal, up to 2 s later (G4).
func recorded(t *testing.T, ns, name, pod string, token int64) *fencingv1.FencedLease {
	t.Helper()
	var fl *fencingv1.FencedLease
	_ = poll(10*time.Second, func() bool {
		fl = getFencedLease(t, ns, name)
		h := fl.Status.Holder
		return h != nil && h.PodName == pod && h.Token == token
	})
	return fl
}

// revocationRecorded is the FencedLease's last revocation once it is token's, or what it
// is after 10 s: a grant is at work on its Lease before the status records it (G4: at
// most 2 s after), and with it the revocation that made room for it.
func revocationRecorded(t *testing.T, ns, name string, token int64) *fencingv1.Revocation {
	t.Helper()
	var rv *fencingv1.Revocation
	_ = poll(10*time.Second, func() bool {
		rv = getFencedLease(t, ns, name).Status.LastRevocation
		return rv != nil && rv.Token == token
	})
	return rv
}

// loggedAt is the kubelet's timestamp of the first line of a container's log holding want.
func loggedAt(t *testing.T, ns, pod, container, want string) time.Time {
	t.Helper()
	raw, err := clientset(t).CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: container, Timestamps: true}).DoRaw(context.Background())
	must(t, err)
	for line := range strings.Lines(string(raw)) {
		stamp, text, _ := strings.Cut(line, " ")
		if strings.Contains(text, want) {
			at, err := time.Parse(time.RFC3339Nano, stamp)
			must(t, err)
			return at
		}
	}
	t.Fatalf("%s/%s's log holds no %q:\n%s", pod, container, want, raw)
	return time.Time{}
}

// podEventAt is when an event of reason about pod first happened (second precision
// for the kubelet's; microseconds for the operator's).
func podEventAt(t *testing.T, ns, pod, reason string) time.Time {
	t.Helper()
	evs, err := clientset(t).CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	must(t, err)
	var first time.Time
	for _, e := range evs.Items {
		at := e.FirstTimestamp.Time
		if at.IsZero() {
			at = e.EventTime.Time
		}
		if e.Reason == reason && e.InvolvedObject.Kind == "Pod" && e.InvolvedObject.Name == pod && (first.IsZero() || at.Before(first)) {
			first = at
		}
	}
	if first.IsZero() {
		t.Fatalf("no %s event for pod %s", reason, pod)
	}
	return first
}
