package main

import (
	"flag"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/fencedlease/fencedlease/hack/manifest"
	"github.com/fencedlease/fencedlease/test/testenv"
)

// TestTheDefaultBundleNeedsNoWebhook: dist/install.yaml has no webhook, no Service or
// Secret for one, no right to rotate a certificate, and its operator is started without
// the webhook (so it is Ready with no certificate); dist/install-webhook.yaml has all of
// them, and its operator serves the webhook.
func TestTheDefaultBundleNeedsNoWebhook(t *testing.T) {
	webhookOnly := []string{
		"MutatingWebhookConfiguration/fencedlease-mutating-webhook-configuration",
		"Service/fencedlease-webhook-service",
		"Secret/fencedlease-webhook-server-cert",
		"Role/fencedlease-webhook-cert-role",
		"RoleBinding/fencedlease-webhook-cert-rolebinding",
		"ClusterRole/fencedlease-webhook-cert-clusterrole",
		"ClusterRoleBinding/fencedlease-webhook-cert-clusterrolebinding",
	}
	for _, tc := range []struct {
		bundle  string
		webhook bool
	}{{defaultBundle, false}, {webhookBundle, true}} {
		t.Run(tc.bundle, func(t *testing.T) {
			objs, err := manifest.Read(filepath.Join(testenv.RepoRoot(), "dist", tc.bundle))
			if err != nil {
				t.Fatal(err)
			}
			has := map[string]bool{}
			for _, o := range objs {
				has[o.GetKind()+"/"+o.GetName()] = true
			}
			for _, obj := range webhookOnly {
				if has[obj] != tc.webhook {
					t.Errorf("%s: has %s is %v", tc.bundle, obj, has[obj])
				}
			}
			if has["MutatingAdmissionPolicy/fencedlease-candidate"] == tc.webhook {
				t.Errorf("%s: the MutatingAdmissionPolicy fencedlease-candidate is there: %v", tc.bundle, !tc.webhook)
			}

			d := &appsv1.Deployment{}
			bundled(t, tc.bundle, "Deployment", d)
			var o webhookOptions
			fs := flag.NewFlagSet("operator", flag.ContinueOnError)
			o.bind(fs)
			var webhookArgs []string
			for _, a := range d.Spec.Template.Spec.Containers[0].Args {
				if strings.HasPrefix(a, "--webhook") {
					webhookArgs = append(webhookArgs, a)
				}
			}
			if err := fs.Parse(webhookArgs); err != nil {
				t.Fatal(err)
			}
			if o.enabled != tc.webhook {
				t.Errorf("%s: the operator serves the webhook: %v (args %v)", tc.bundle, o.enabled, webhookArgs)
			}
		})
	}
}
