package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/test/testenv"
)

// TestHoldInAWarmStandby runs `hold -- CMD` with the environment the webhook gives a Warm
// standby (names and UID, FENCING_TOKEN empty): hold waits for the grant on a watch, and
// CMD runs the moment the grant is confirmed, with its token; when the holder's command
// ends, the standby's starts at once.
func TestHoldInAWarmStandby(t *testing.T) {
	env, cfg, c := testenv.StartT(t)
	const ns = "warm-hold"
	pods := candidatesOf(t, c, cfg, ns, fencingv1.FencedLeaseSpec{LeaseDurationSeconds: 3, Standby: fencingv1.StandbyWarm},
		testenv.WarmCandidatePod)
	dir := t.TempDir()
	bin := testenv.BuildAgent(t, dir)
	kubeconfig := testenv.WriteKubeconfig(t, env, testenv.ShellAdmin, dir)
	// The environment the webhook gives a Warm standby's containers, resolved.
	warmHold := func(pod string, command ...string) (*exec.Cmd, *testenv.LockedBuffer) {
		cmd := exec.Command(bin, append([]string{"hold", "--stop-grace=500ms", "--"}, command...)...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "FENCING_TOKEN=",
			fencingv1.EnvLeaseName+"=invoices", fencingv1.EnvLeaseNamespace+"="+ns,
			fencingv1.EnvHolderIdentity+"="+pod, fencingv1.EnvHolderUID+"="+string(pods[pod].UID))
		var buf testenv.LockedBuffer
		cmd.Stdout, cmd.Stderr = &buf, &buf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
		return cmd, &buf
	}
	stopA := filepath.Join(dir, "stop-a")
	_, aOut := warmHold("a", "sh", "-c", `echo "a token=$FENCING_TOKEN"; while [ ! -e `+stopA+` ]; do sleep 0.02; done`)
	_, bOut := warmHold("b", "sh", "-c", `echo "b started token=$FENCING_TOKEN"; sleep 30`)
	testenv.WaitFor(t, 15*time.Second, "a's command to run with token 1", func() bool { return strings.Contains(aOut.String(), "a token=1") })
	time.Sleep(2 * time.Second) // b waits through several renewals of a
	if out := bOut.String(); strings.Contains(out, "started") || !strings.Contains(out, "waiting until Lease") {
		t.Fatalf("b's command ran before it was granted, or hold did not say it waits:\n%s", out)
	}
	if err := os.WriteFile(stopA, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ended := time.Now()
	testenv.WaitFor(t, 10*time.Second, "b's command to run with token 2", func() bool { return strings.Contains(bOut.String(), "b started token=2") })
	t.Logf("a's command ended → b's command running with token 2: %v (lease 3 s: a release, not an expiry)", time.Since(ended))
}
