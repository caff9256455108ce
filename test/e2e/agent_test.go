package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/test/testenv"
)

// TestAgentBinary runs the small binary's sidecar as the webhook injects it, with the
// pod's environment: its startupProbe fails until the agent's first renewal and passes
// after it, the state file says Holding with the token, and on SIGTERM (the pod stopping)
// it exits 0 and leaves the grant to the operator, which ends it with the pod.
func TestAgentBinary(t *testing.T) {
	env, cfg, c := testenv.StartT(t)
	ctx := context.Background()
	const ns = "sidecar"
	candidates(t, c, cfg, ns, 30) // a lease far longer than the test: only a release hands over
	dir := t.TempDir()
	bin := testenv.BuildAgent(t, dir)
	state := filepath.Join(dir, "state")
	podEnv := append(os.Environ(), "KUBECONFIG="+testenv.WriteKubeconfig(t, env, testenv.ShellAdmin, dir), "FENCING_TOKEN=1",
		"FENCING_LEASE_NAME=invoices", "FENCING_LEASE_NAMESPACE="+ns, "FENCING_HOLDER_IDENTITY=a")
	agent := func(args ...string) *exec.Cmd {
		cmd := exec.Command(bin, append([]string{"agent"}, args...)...)
		cmd.Env = podEnv
		return cmd
	}
	holder := func() *fencingv1.Holder {
		fl := &fencingv1.FencedLease{}
		if c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "invoices"}, fl) != nil {
			return nil
		}
		return fl.Status.Holder
	}
	testenv.WaitFor(t, 10*time.Second, "a to be granted token 1", func() bool { h := holder(); return h != nil && h.PodName == "a" })

	if out, err := agent("--probe").CombinedOutput(); err == nil {
		t.Fatalf("the startupProbe passed before any renewal:\n%s", out)
	}
	var logs testenv.LockedBuffer
	sidecar := agent("--state-file="+state, "--state-address=")
	sidecar.Stderr = &logs
	if err := sidecar.Start(); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 10*time.Second, "the startupProbe to pass", func() bool { return agent("--probe").Run() == nil })
	var view struct {
		State string `json:"state"`
		Token int64  `json:"token"`
	}
	testenv.WaitFor(t, 10*time.Second, "the state file to say Holding", func() bool {
		raw, err := os.ReadFile(state)
		return err == nil && json.Unmarshal(raw, &view) == nil && view.State == "Holding"
	})
	if view.Token != 1 {
		t.Fatalf("state file token %d, want 1", view.Token)
	}

	if err := sidecar.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := sidecar.Wait(); err != nil {
		t.Fatalf("agent on SIGTERM: %v\n%s", err, logs.String())
	}
	if h := holder(); h == nil || h.PodName != "a" || h.Token != 1 {
		t.Fatalf("after the agent stopped the holder is %+v; the grant should stay a's until the pod goes", h)
	}
	if err := c.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a"}}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 10*time.Second, "b to be granted token 2 once a is deleted (lease 30 s)", func() bool {
		h := holder()
		return h != nil && h.PodName == "b" && h.Token == 2
	})
	if !strings.Contains(logs.String(), `"holding grant"`) {
		t.Errorf("the agent's log (JSON lines) lacks its grant:\n%s", logs.String())
	}
}

// TestAgentInAWarmStandby runs the sidecar with the environment admission gives every
// candidate, in a pod that started before its grant: FENCING_TOKEN is there, and empty.
// The agent waits for the grant and confirms it, as it does for a pod with no such
// variable at all.
func TestAgentInAWarmStandby(t *testing.T) {
	env, cfg, c := testenv.StartT(t)
	const ns = "warm-sidecar"
	pods := candidatesOf(t, c, cfg, ns, fencingv1.FencedLeaseSpec{LeaseDurationSeconds: 30, Standby: fencingv1.StandbyWarm},
		testenv.WarmCandidatePod)
	dir := t.TempDir()
	bin := testenv.BuildAgent(t, dir)
	state := filepath.Join(dir, "state")
	cmd := exec.Command(bin, "agent", "--state-file="+state, "--state-address=")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+testenv.WriteKubeconfig(t, env, testenv.ShellAdmin, dir), "FENCING_TOKEN=", "FENCING_SLOT=",
		"FENCING_LEASE_NAME=invoices", "FENCING_LEASE_NAMESPACE="+ns, "FENCING_HOLDER_IDENTITY=a", "FENCING_HOLDER_UID="+string(pods["a"].UID))
	var logs testenv.LockedBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
	var view struct {
		State string `json:"state"`
		Token int64  `json:"token"`
	}
	testenv.WaitFor(t, 15*time.Second, "the agent to confirm a's grant: state Holding, token 1", func() bool {
		raw, err := os.ReadFile(state)
		return err == nil && json.Unmarshal(raw, &view) == nil && view.State == "Holding" && view.Token == 1
	})
	if strings.Contains(logs.String(), "is not a granted token") {
		t.Fatalf("the agent read the empty FENCING_TOKEN as a token:\n%s", logs.String())
	}
}
