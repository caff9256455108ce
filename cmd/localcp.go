package main

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/fencedlease/fencedlease/config/crd"
)

// startLocalControlPlane runs kube-apiserver and etcd from assets (no kubelet, scheduler
// or garbage collector), installs the CRDs and writes an admin kubeconfig. The caller
// must call stop before exiting, or the two processes outlive it.
func startLocalControlPlane(assets, kubeconfig string) (*rest.Config, func(), error) {
	if assets == "" {
		return nil, nil, fmt.Errorf("the embedded control plane needs kube-apiserver and etcd: run 'make envtest' and pass --local-control-plane-assets (or KUBEBUILDER_ASSETS)")
	}
	crds, err := crd.Objects()
	if err != nil {
		return nil, nil, err
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDInstallOptions:     envtest.CRDInstallOptions{CRDs: crds},
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, nil, fmt.Errorf("starting embedded control plane from %s: %w", assets, err)
	}
	stop := func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "fencedlease: stopping embedded control plane:", err)
		}
	}
	if err := writeKubeconfig(env, kubeconfig); err != nil {
		stop()
		return nil, nil, err
	}
	abs, _ := filepath.Abs(kubeconfig)
	fmt.Fprintf(os.Stderr, "\nfencedlease: embedded control plane at %s\n"+
		"  in another shell:  export KUBECONFIG=%s\n"+
		"                     kubectl apply -k config/samples && kubectl get fl\n"+
		"  (no kubelet here: pods stay Pending; the controller still grants, renews and revokes)\n"+
		"  Ctrl-C stops the operator and the control plane.\n\n", cfg.Host, abs)
	return cfg, stop, nil
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
