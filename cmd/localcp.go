package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/fencedlease/fencedlease/config/crd"
	"github.com/fencedlease/fencedlease/config/policy"
	"github.com/fencedlease/fencedlease/config/webhook"
)

// localControlPlane is kube-apiserver and etcd run by this process (no kubelet,
// scheduler or garbage collector), with the CRDs and the admission policies: as the
// default install, candidates are admitted by the API server. With --webhook, the
// webhooks are installed too, pointed back at this process.
type localControlPlane struct {
	cfg *rest.Config
	// webhook says where to serve the webhooks, when asked for: a local port with a
	// generated cert.
	webhook envtest.WebhookInstallOptions
	// stop must be called before exiting, or the two processes outlive this one.
	stop func()
}

// startLocalControlPlane starts the control plane from assets, installs what the
// operator needs, and writes an admin kubeconfig for the user to kubectl with. That user
// is not the operator, so the admission policies apply to it as to any cluster admin.
func startLocalControlPlane(assets, kubeconfig string, withWebhook bool) (*localControlPlane, error) {
	if assets == "" {
		return nil, fmt.Errorf("the embedded control plane needs kube-apiserver and etcd: run 'make envtest' and pass --local-control-plane-assets (or KUBEBUILDER_ASSETS)")
	}
	crds, err := crd.Objects()
	if err != nil {
		return nil, err
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDInstallOptions:     envtest.CRDInstallOptions{CRDs: crds},
	}
	admits := "the admission policies (they admit candidates: no webhook)"
	if withWebhook {
		hook, err := webhook.Configuration()
		if err != nil {
			return nil, err
		}
		env.WebhookInstallOptions.MutatingWebhooks = []*admissionregistrationv1.MutatingWebhookConfiguration{hook}
		admits = "the admission policies and the webhooks"
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting embedded control plane from %s: %w", assets, err)
	}
	lcp := &localControlPlane{cfg: cfg, webhook: env.WebhookInstallOptions, stop: func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "fencedlease: stopping embedded control plane:", err)
		}
	}}
	if err := installPolicies(cfg); err != nil {
		lcp.stop()
		return nil, fmt.Errorf("installing the admission policies: %w", err)
	}
	if err := writeKubeconfig(env, kubeconfig); err != nil {
		lcp.stop()
		return nil, err
	}
	abs, _ := filepath.Abs(kubeconfig)
	fmt.Fprintf(os.Stderr, "\nfencedlease: embedded control plane at %s, with %s\n"+
		"  in another shell:  export KUBECONFIG=%s\n"+
		"                     kubectl apply -k config/samples && kubectl get fl\n"+
		"  (no kubelet here: pods stay Pending; the controller still grants, renews and revokes)\n"+
		"  Ctrl-C stops the operator and the control plane.\n\n", cfg.Host, admits, abs)
	return lcp, nil
}

// installPolicies installs config/policy with its parameter naming the user of cfg,
// which the operator runs as here, and waits until they admit candidates.
func installPolicies(cfg *rest.Config) error {
	ctx := context.Background()
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return err
	}
	review := &authenticationv1.SelfSubjectReview{}
	if err := c.Create(ctx, review); err != nil {
		return err
	}
	objs, err := policy.Objects(review.Status.UserInfo.Username, localAgentImage)
	if err != nil {
		return err
	}
	if err := policy.Install(ctx, c, objs); err != nil {
		return err
	}
	return policy.WaitUntilCandidatesAdmitted(ctx, c)
}

func writeKubeconfig(env *envtest.Environment, path string) error {
	user, err := env.AddUser(envtest.User{Name: "local-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return err
	}
	raw, err := user.KubeConfig()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, raw, 0o600)
}
