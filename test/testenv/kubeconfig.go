package testenv

import (
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// ShellAdmin is a cluster admin as a person at a shell is one.
var ShellAdmin = envtest.User{Name: "shell", Groups: []string{"system:masters"}}

// WriteKubeconfig adds user to env and writes a kubeconfig for it into dir, as a person at
// a shell has one; it returns the file's path.
func WriteKubeconfig(t testing.TB, env *envtest.Environment, user envtest.User, dir string) string {
	t.Helper()
	u, err := env.AddUser(user, nil)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := u.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, user.Name+".kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
