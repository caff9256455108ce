package realnode

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// testAdmissionTimes measures, for Cold and Warm candidates, the create call and pod
// created → at work (Cold: granted and started; Warm: let run and waiting), admitted by
// the mutating policy as shipped, then by the pod webhook alone (the webhook install, and
// the policy's binding deleted, as on a cluster older than 1.36). No bound is asserted:
// the numbers go to the report.
func testAdmissionTimes(t *testing.T) {
	ctx := context.Background()
	// Three candidates per mode, each of a FencedLease of its own; a Warm one's FencedLease
	// is suspended, so its workload is measured running and waiting, never granted.
	measure := func(by string) {
		t.Helper()
		for _, mode := range []fencingv1.StandbyMode{fencingv1.StandbyCold, fencingv1.StandbyWarm} {
			ns := strings.ToLower(fmt.Sprintf("admit-%s-%s", by, mode))
			newNamespace(t, ns)
			var calls, working []time.Duration
			for i := range 3 {
				lease := fmt.Sprintf("timed-%d", i)
				must(t, rc.Client.Create(ctx, &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: lease},
					Spec: fencingv1.FencedLeaseSpec{LeaseDurationSeconds: 10, Standby: mode, Suspend: mode == fencingv1.StandbyWarm}}))
				pod := workloadPod(ns, lease, lease, corev1.Container{Name: "work", Command: []string{"/workload"}})
				start := time.Now()
				must(t, rc.Client.Create(ctx, pod))
				calls = append(calls, time.Since(start))
				// Cold: the workload starts granted, with its token; Warm: it starts before
				// any grant, its FENCING_TOKEN empty.
				want := "env=1 file=1"
				if mode == fencingv1.StandbyWarm {
					want = "env= file="
				}
				working = append(working, reportedAt(t, ns, lease, "work", want, 2*time.Minute).Sub(start))
			}
			slices.Sort(calls)
			slices.Sort(working)
			measured(fmt.Sprintf("%s candidate, admitted by the %s: create call; → at work", mode, by), "min/median/max %v/%v/%v; %v/%v/%v",
				calls[0].Round(time.Millisecond), calls[1].Round(time.Millisecond), calls[2].Round(time.Millisecond),
				working[0].Round(10*time.Millisecond), working[1].Round(10*time.Millisecond), working[2].Round(10*time.Millisecond))
		}
	}
	measure("policy")

	// The webhook alone, as on a cluster older than 1.36: dist/install-webhook.yaml
	// applied (the operator now serves the webhook, once its certificate is provisioned),
	// and the policy's binding deleted, which kubectl apply leaves. To tell when the API
	// server stops calling the policy, its parameter first names another agent image: a
	// dry-run pod asking for the agent shows whose image it got. Back to the default
	// install however the spec ends, as docs/operations.md "Upgrade" says.
	t.Cleanup(func() {
		measured("webhook install → default install (apply, webhook objects deleted → rolled out)", "%v", toDefaultInstall(t).Round(100*time.Millisecond))
	})
	measured("default install → webhook install (kubectl apply dist/install-webhook.yaml → rolled out)", "%v", toWebhookInstall(t).Round(100*time.Millisecond))
	const marker = "agent:admitted-by-the-policy"
	patch := fmt.Sprintf(`{"data":{"agentImage":%q}}`, marker)
	if out, err := kubectl("-n", operatorNamespace, "patch", "configmap", "fencedlease-admission-params", "--type=merge", "-p", patch); err != nil {
		t.Fatalf("setting the parameter's agent image: %v\n%s", err, out)
	}
	if out, err := kubectl("delete", "mutatingadmissionpolicybinding", "fencedlease-candidate"); err != nil {
		t.Fatalf("deleting the policy's binding: %v\n%s", err, out)
	}
	probe := func(annotations ...string) (string, error) {
		args := []string{"-n", "default", "run", "admission-probe", "--image=fencedlease:dev", "--restart=Never", "--dry-run=server",
			"--labels=" + fencingv1.LeaseLabel + "=probe", "--annotations=" + fencingv1.AgentAnnotation + "=true"}
		for _, a := range annotations {
			args = append(args, "--annotations="+a)
		}
		return kubectl(append(args, "-o", "jsonpath={.spec.initContainers[0].image}")...)
	}
	if err := poll(time.Minute, func() bool { img, err := probe(); return err == nil && img != "" && img != marker }); err != nil {
		img, err := probe()
		t.Fatalf("the API server still calls the policy a minute after its binding was deleted: %q %v", img, err)
	}
	// The webhook answers through its Service with the certificate the operator made.
	if out, err := probe(fencingv1.TokenAnnotation + "=99"); err == nil || !strings.Contains(out, `admission webhook "pods.fencing.fencedlease.io" denied the request`) {
		t.Errorf("a pod bringing its own token: want the webhook's refusal, got %v:\n%s", err, out)
	}
	measure("webhook")
}
