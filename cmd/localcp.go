package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/fencedlease/fencedlease/config/crd"
)

// startLocalControlPlane runs kube-apiserver and etcd from assets (no kubelet, scheduler
// or garbage collector), installs the CRDs, writes an admin kubeconfig and stops the
// control plane when ctx ends.
func startLocalControlPlane(ctx context.Context, assets, kubeconfig string) (*rest.Config, error) {
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
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting embedded control plane from %s: %w", assets, err)
	}
	go func() {
		<-ctx.Done()
		_ = env.Stop()
	}()
	user, err := env.AddUser(envtest.User{Name: "local-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, err
	}
	raw, err := user.KubeConfig()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(kubeconfig), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(kubeconfig, raw, 0o600); err != nil {
		return nil, err
	}
	abs, _ := filepath.Abs(kubeconfig)
	fmt.Fprintf(os.Stderr, "\nfencedlease: embedded control plane at %s\n"+
		"  in another shell:  export KUBECONFIG=%s\n"+
		"                     kubectl apply -k config/samples && kubectl get fl\n"+
		"  (no kubelet here: pods stay Pending; the controller still grants, renews and revokes)\n"+
		"  Ctrl-C stops the operator and the control plane.\n\n", cfg.Host, abs)
	return cfg, nil
}
