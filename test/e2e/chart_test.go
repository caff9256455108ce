package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/fencedlease/fencedlease/controllers/admissioncheck"
	"github.com/fencedlease/fencedlease/hack/manifest"
	"github.com/fencedlease/fencedlease/test/testenv"
)

// helm runs bin/helm (make test builds it from hack/helm) in the repository.
func helm(t *testing.T, args ...string) string {
	t.Helper()
	bin := filepath.Join(testenv.RepoRoot(), "bin", "helm")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%v: run 'make helm' (make test does)", err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = testenv.RepoRoot()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// kindsWithoutCRDs are rendered by the chart's options for other operators' CRDs, which
// this control plane does not have: they are checked by content, not by the API server.
var kindsWithoutCRDs = []string{"Certificate", "Issuer", "ServiceMonitor", "PrometheusRule"}

// TestHelmChart lints the chart and installs what it renders — with the default values,
// with every value changed, and with the webhook on a cluster without
// MutatingAdmissionPolicy — on a real API server: the CRD created, everything else
// by a server-side dry run, then the admission policies and their parameter for real, where
// the operator's own start-up check, run as the chart's service account, must find all
// four in place and naming it.
func TestHelmChart(t *testing.T) {
	helm(t, "lint", "--strict", "charts/fencedlease", "--kube-version", "1.37.2", "--set", "webhook.enabled=true")
	// Neither the mutating policy nor the webhook: refused at install, naming the value.
	args := []string{"template", "fencedlease", "charts/fencedlease", "--kube-version", "1.35.0"}
	cmd := exec.Command(filepath.Join(testenv.RepoRoot(), "bin", "helm"), args...)
	cmd.Dir = testenv.RepoRoot()
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "set webhook.enabled=true") {
		t.Errorf("helm template on a cluster without MutatingAdmissionPolicy and without the webhook: want refused naming webhook.enabled, got %v:\n%s", err, out)
	}
	env, err := testenv.New()
	if err != nil {
		t.Fatal(err)
	}
	env.CRDDirectoryPaths = nil // the chart brings its own
	cfg, c := testenv.StartEnvT(t, env)
	ctx := context.Background()

	for _, tc := range []struct {
		name, namespace, serviceAccount string
		set                             []string
		want, absent                    []string // kinds
		// noMutatingPolicies: the cluster serves no MutatingAdmissionPolicy (1.30–1.35).
		noMutatingPolicies bool
	}{
		{name: "defaults", namespace: "fencedlease-system", serviceAccount: "fencedlease-controller-manager",
			want: []string{"CustomResourceDefinition", "Deployment", "PodDisruptionBudget", "ValidatingAdmissionPolicy",
				"MutatingAdmissionPolicy", "Service"},
			absent: append([]string{"MutatingWebhookConfiguration", "Secret"}, kindsWithoutCRDs...)},
		{name: "everything changed", namespace: "ops", serviceAccount: "fl-op",
			set: []string{"serviceAccount.name=fl-op", "replicas=1", "webhook.enabled=true", "certManager.enabled=true", "metrics.serviceMonitor.enabled=true",
				"metrics.prometheusRule.enabled=true", "image.repository=registry.example/fl", "image.tag=v9", "agentImage.repository=registry.example/fl-agent", "priorityClassName=fl-critical",
				"leaderElection.leaseDuration=20s", "leaderElection.renewDeadline=15s", "leaderElection.retryPeriod=2s", "resources.limits.memory=1Gi"},
			want:   append([]string{"Deployment", "MutatingWebhookConfiguration", "MutatingAdmissionPolicy"}, kindsWithoutCRDs...),
			absent: []string{"PodDisruptionBudget"}},
		{name: "Kubernetes 1.35, the webhook", namespace: "fencedlease-system", serviceAccount: "fencedlease-controller-manager",
			set: []string{"webhook.enabled=true"}, noMutatingPolicies: true,
			want:   []string{"Deployment", "MutatingWebhookConfiguration", "Secret", "ValidatingAdmissionPolicy"},
			absent: append([]string{"MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"}, kindsWithoutCRDs...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// helm install learns the API of the cluster; helm template is told it.
			args := []string{"template", "fencedlease", "charts/fencedlease", "-n", tc.namespace, "--include-crds", "--kube-version", "1.37.2"}
			if !tc.noMutatingPolicies {
				args = append(args, "--api-versions", "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy",
					"--api-versions", "admissionregistration.k8s.io/v1/MutatingAdmissionPolicyBinding")
			}
			for _, s := range tc.set {
				args = append(args, "--set", s)
			}
			objs, err := manifest.Parse(helm(t, args...))
			if err != nil {
				t.Fatal(err)
			}
			kinds := map[string]int{}
			for _, o := range objs {
				kinds[o.GetKind()]++
			}
			for _, k := range tc.want {
				if kinds[k] == 0 {
					t.Errorf("renders no %s", k)
				}
			}
			for _, k := range tc.absent {
				if kinds[k] != 0 {
					t.Errorf("renders a %s", k)
				}
			}
			if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tc.namespace}}); client.IgnoreAlreadyExists(err) != nil {
				t.Fatal(err)
			}
			for _, o := range objs {
				checkObject(t, o, tc.namespace, tc.serviceAccount, tc.set)
				switch {
				case slices.Contains(kindsWithoutCRDs, o.GetKind()):
				case o.GetKind() == "CustomResourceDefinition":
					if err := c.Create(ctx, o); client.IgnoreAlreadyExists(err) != nil {
						t.Fatal(err)
					}
				default:
					if err := c.Create(ctx, o.DeepCopy(), client.DryRunAll); err != nil {
						t.Errorf("%s %s: %v", o.GetKind(), o.GetName(), err)
					}
				}
			}

			// The policies for real, then the operator's start-up check as the chart's account.
			for _, o := range objs {
				if k := o.GetKind(); strings.HasPrefix(k, "ValidatingAdmissionPolicy") || strings.HasPrefix(k, "MutatingAdmissionPolicy") || k == "ConfigMap" || k == "MutatingWebhookConfiguration" {
					if err := c.Create(ctx, o.DeepCopy()); err != nil {
						t.Fatalf("%s %s: %v", k, o.GetName(), err)
					}
					t.Cleanup(func() { _ = c.Delete(ctx, o) }) // the next values install their own
				}
			}
			operator, err := client.New(testenv.AsUser(cfg, "system:serviceaccount:"+tc.namespace+":"+tc.serviceAccount,
				[]string{"system:serviceaccounts", "system:masters"}, nil), client.Options{Scheme: testenv.Scheme()})
			if err != nil {
				t.Fatal(err)
			}
			// The candidate policy injects the agent image the chart gives the operator.
			check := &admissioncheck.Checker{Client: operator, Recorder: events.NewFakeRecorder(16), AgentImage: agentImageOf(t, objs)}
			if slices.Contains(tc.set, "webhook.enabled=true") {
				check.WebhookConfiguration = "fencedlease-mutating-webhook-configuration" // as the operator is told with --webhook
			}
			if problems := check.Check(ctx); len(problems) != 0 {
				t.Errorf("the chart's policies do not name its operator: %v", problems)
			}
		})
	}
}

// agentImageOf is the AGENT_IMAGE the rendered Deployment gives the operator.
func agentImageOf(t *testing.T, objs []*unstructured.Unstructured) string {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			env, _, _ := unstructured.NestedSlice(c.(map[string]any), "env")
			for _, e := range env {
				if e := e.(map[string]any); e["name"] == "AGENT_IMAGE" {
					return e["value"].(string)
				}
			}
		}
	}
	t.Fatal("no AGENT_IMAGE in the rendered Deployment")
	return ""
}

// checkObject checks that the values reached the object: the release namespace and the
// service account everywhere, and the Deployment's settings.
func checkObject(t *testing.T, o *unstructured.Unstructured, namespace, serviceAccount string, set []string) {
	t.Helper()
	raw, _ := yaml.Marshal(o.Object)
	if text := string(raw); namespace != "fencedlease-system" && strings.Contains(text, "fencedlease-system") {
		t.Errorf("%s %s still names fencedlease-system", o.GetKind(), o.GetName())
	}
	for _, b := range []string{"RoleBinding", "ClusterRoleBinding"} {
		if o.GetKind() != b {
			continue
		}
		subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
		for _, s := range subjects {
			m := s.(map[string]any)
			if m["kind"] == "ServiceAccount" && (m["name"] != serviceAccount || m["namespace"] != namespace) {
				t.Errorf("%s %s binds %v/%v, not the chart's %s/%s", b, o.GetName(), m["namespace"], m["name"], namespace, serviceAccount)
			}
		}
	}
	if o.GetKind() != "Deployment" {
		return
	}
	pod, _, _ := unstructured.NestedMap(o.Object, "spec", "template", "spec")
	if pod["serviceAccountName"] != serviceAccount {
		t.Errorf("the Deployment runs as %v", pod["serviceAccountName"])
	}
	container := pod["containers"].([]any)[0].(map[string]any)
	args := strings.Join(toStrings(container["args"].([]any)), " ")
	if len(set) == 0 {
		for _, want := range []string{"--leader-election-lease-duration=10s", "--metrics-bind-address=:8443", "--metrics-secure=true"} {
			if !strings.Contains(args, want) {
				t.Errorf("default args lack %s: %s", want, args)
			}
		}
		if strings.Contains(args, "--webhook") {
			t.Errorf("the webhook is off by default: %s", args)
		}
		if agent := envValue(container, "AGENT_IMAGE"); !strings.HasPrefix(agent, "fencedlease-agent:") {
			t.Errorf("AGENT_IMAGE %q, want the fencedlease-agent image", agent)
		}
		return
	}
	if webhook := slices.Contains(set, "webhook.enabled=true"); webhook != strings.Contains(args, "--webhook=true") {
		t.Errorf("webhook.enabled=%v, args %s", webhook, args)
	}
	if !slices.Contains(set, "image.tag=v9") {
		return
	}
	if agent := envValue(container, "AGENT_IMAGE"); agent != "registry.example/fl-agent:v9" {
		t.Errorf("AGENT_IMAGE %q, want agentImage.repository with image.tag", agent)
	}
	for _, want := range []string{"--leader-election-lease-duration=20s", "--leader-election-renew-deadline=15s", "--leader-election-retry-period=2s", "--webhook-cert-rotation=false"} {
		if !strings.Contains(args, want) {
			t.Errorf("args lack %s: %s", want, args)
		}
	}
	if container["image"] != "registry.example/fl:v9" || pod["priorityClassName"] != "fl-critical" {
		t.Errorf("image %v, priority class %v", container["image"], pod["priorityClassName"])
	}
	if mem, _, _ := unstructured.NestedString(container, "resources", "limits", "memory"); mem != "1Gi" {
		t.Errorf("memory limit %q", mem)
	}
}

// envValue is the literal value of container's env var name.
func envValue(container map[string]any, name string) string {
	env, _, _ := unstructured.NestedSlice(container, "env")
	for _, e := range env {
		if m, _ := e.(map[string]any); m["name"] == name {
			v, _ := m["value"].(string)
			return v
		}
	}
	return ""
}

func toStrings(xs []any) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i], _ = x.(string)
	}
	return out
}
