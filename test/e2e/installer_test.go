package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/fencedlease/fencedlease/test/testenv"
)

// TestInstallBundleDryRun sends every object of dist/install.yaml, then of
// dist/install-webhook.yaml, to a real API server with a server-side dry run: schema, CEL,
// policies and references must all be accepted.
func TestInstallBundleDryRun(t *testing.T) {
	assets, err := testenv.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	env := &envtest.Environment{BinaryAssetsDirectory: assets}
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, bundle := range []struct {
		file     string
		admitter string // the kind that admits candidates
	}{{"install.yaml", "MutatingAdmissionPolicy"}, {"install-webhook.yaml", "MutatingWebhookConfiguration"}} {
		t.Run(bundle.file, func(t *testing.T) { dryRunBundle(t, c, bundle.file, bundle.admitter) })
	}
}

func dryRunBundle(t *testing.T, c client.Client, file, admitter string) {
	ctx := context.Background()
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "dist", file))
	if err != nil {
		t.Fatalf("%v: run 'make build-installer'", err)
	}
	kinds := map[string]int{}
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		obj := map[string]any{}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatal(err)
		}
		if len(obj) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: obj}
		kinds[u.GetKind()]++
		if u.GetKind() == "Namespace" {
			// A dry run cannot create the namespace the other objects go into.
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: u.GetName()}}
			if err := c.Create(ctx, ns); client.IgnoreAlreadyExists(err) != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := c.Create(ctx, u, client.DryRunAll); err != nil {
			t.Errorf("%s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	for _, kind := range []string{"CustomResourceDefinition", "Deployment", admitter, "Service",
		"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "ClusterRole", "Role", "ServiceAccount"} {
		if kinds[kind] == 0 {
			t.Errorf("%s has no %s", file, kind)
		}
	}
}
