package e2e

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/test/testenv"
)

// TestHold runs `fencedlease-agent hold` (the operator's binary serves the same code) as a
// shell user would, outside a pod, naming the candidate: it waits for the grant, runs the
// command with the token, exits with the command's status and hands over at once; when
// the grant moves on it stops the command and exits 75.
func TestHold(t *testing.T) {
	env, cfg, c := testenv.StartT(t)
	ctx := context.Background()
	const ns = "hold"
	candidates(t, c, cfg, ns, 3)
	dir := t.TempDir()
	bin := testenv.BuildAgent(t, dir)
	kubeconfig := testenv.WriteKubeconfig(t, env, testenv.ShellAdmin, dir)
	hold := func(pod string, command ...string) *exec.Cmd {
		return holdCommand(bin, kubeconfig, ns, pod, nil, command...)
	}
	exitCode := func(err error) int {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	}

	out, err := hold("a", "sh", "-c", `echo "token=$FENCING_TOKEN"; exit 7`).CombinedOutput()
	if code := exitCode(err); code != 7 || !strings.Contains(string(out), "token=1") {
		t.Fatalf("hold as a: exit %d, want 7 with token 1:\n%s", code, out)
	}
	exited := time.Now()
	var next *fencingv1.Holder
	testenv.WaitFor(t, 10*time.Second, "b to be granted token 2", func() bool {
		fl := &fencingv1.FencedLease{}
		if c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "invoices"}, fl) != nil || fl.Status.Holder == nil {
			return false
		}
		next = fl.Status.Holder
		return next.PodName == "b" && next.Token == 2
	})
	t.Logf("hold: b granted %v after a's hold returned (negative: before it returned; lease 3 s: released, not expired)", next.AcquireTime.Sub(exited))

	// b holds; its pod is deleted, so the operator ends the grant: hold stops the command.
	cmd := hold("b", "sh", "-c", `trap "exit 0" TERM; echo started; while :; do sleep 0.05; done`)
	var buf testenv.LockedBuffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 10*time.Second, "b's command to start", func() bool { return strings.Contains(buf.String(), "started") })
	if err := c.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "b"}}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if code := exitCode(err); code != 75 || !strings.Contains(buf.String(), "was stopped") {
			t.Fatalf("hold as b after its grant ended: exit %d, want 75:\n%s", code, buf.String())
		}
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("hold did not stop after the grant ended:\n%s", buf.String())
	}
}

// candidates creates namespace ns with a controller watching it, a FencedLease "invoices"
// with the given lease, and candidate pods a and b (a is granted first).
func candidates(t *testing.T, c client.Client, cfg *rest.Config, ns string, leaseSeconds int32) {
	t.Helper()
	candidatesOf(t, c, cfg, ns, fencingv1.FencedLeaseSpec{LeaseDurationSeconds: leaseSeconds}, testenv.CandidatePod)
}

// candidatesOf is candidates with FencedLease spec and pods as pod builds them; it returns
// the pods as created.
func candidatesOf(t *testing.T, c client.Client, cfg *rest.Config, ns string, spec fencingv1.FencedLeaseSpec,
	pod func(ns, name, lease string) *corev1.Pod) map[string]*corev1.Pod {
	t.Helper()
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	op, err := testenv.StartController(cfg, ns, testenv.ControllerOptions{Name: "operator-" + ns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = op.Stop() })
	if err := c.Create(ctx, &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "invoices"}, Spec: spec}); err != nil {
		t.Fatal(err)
	}
	pods := map[string]*corev1.Pod{}
	for _, name := range []string{"a", "b"} {
		p := pod(ns, name, "invoices")
		if err := c.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		pods[name] = p
	}
	return pods
}

// holdCommand is `fencedlease-agent hold -- command` for pod's grant of ns's "invoices", as a
// shell user outside any pod runs it: the grant named by flags, no injected environment,
// env added.
func holdCommand(bin, kubeconfig, ns, pod string, env []string, command ...string) *exec.Cmd {
	args := append([]string{"hold", "--stop-grace=500ms", "--lease=invoices", "--namespace=" + ns, "--identity=" + pod, "--"}, command...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(append(os.Environ(), "KUBECONFIG="+kubeconfig,
		"FENCING_TOKEN=", "FENCING_LEASE_NAME=", "FENCING_LEASE_NAMESPACE=", "FENCING_HOLDER_IDENTITY="), env...)
	return cmd
}
