// Package plane is the control plane the envtest suites start: a kube-apiserver and etcd
// built from Go modules (`make envtest`) with the CRDs installed. It imports none of the
// operator's packages, so the controller's own in-package tests can start one too.
package plane

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/fencedlease/fencedlease/config/crd"
)

// RepoRoot is the repository's top folder.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// AssetsDir is KUBEBUILDER_ASSETS, or the folder `make envtest` builds into.
func AssetsDir() (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir, nil
	}
	matches, _ := filepath.Glob(filepath.Join(RepoRoot(), "bin", "k8s", "*"))
	if len(matches) == 0 {
		return "", errors.New("no control plane binaries: run 'make envtest' (or 'make test')")
	}
	return matches[len(matches)-1], nil
}

// startTimeout is how long each component of a control plane may take to become ready.
const startTimeout = time.Minute

// New returns an environment with the CRDs; the caller may add to it, then Start it.
func New() (*envtest.Environment, error) {
	assets, err := AssetsDir()
	if err != nil {
		return nil, err
	}
	crds, err := crd.Objects()
	if err != nil {
		return nil, err
	}
	return &envtest.Environment{
		CRDInstallOptions:     envtest.CRDInstallOptions{CRDs: crds},
		BinaryAssetsDirectory: assets,
		// envtest gives each component 20 s: make test starts six control planes and a real
		// cluster on two CPUs, where a kube-apiserver took longer to become ready (five
		// attempts failed).
		ControlPlaneStartTimeout: startTimeout,
	}, nil
}

// StartT starts env for one test: it fails the test when the control plane cannot start,
// and stops it when the test ends.
func StartT(t testing.TB, env *envtest.Environment) *rest.Config {
	t.Helper()
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	return cfg
}
