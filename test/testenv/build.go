package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// GoBuild is `go build args...` from the repository's root, the way the Dockerfile builds
// the shipped binaries: no cgo, no local paths (-trimpath). Tests build what ships, and a
// cold machine compiles their dependencies in one mode, the one hack/envtest builds the
// control plane in, not in one more.
func GoBuild(args ...string) *exec.Cmd {
	build := exec.Command("go", append([]string{"build", "-trimpath"}, args...)...)
	build.Dir = RepoRoot()
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	return build
}

// Build builds package pkg (relative to the repository's root) into dir/name.
func Build(t testing.TB, dir, name, pkg string) string {
	t.Helper()
	bin := filepath.Join(dir, name)
	if out, err := GoBuild("-o", bin, pkg).CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// BuildOperator builds the fencedlease binary into dir.
func BuildOperator(t testing.TB, dir string) string {
	t.Helper()
	return Build(t, dir, "fencedlease", "./cmd")
}

// BuildAgent builds the small fencedlease-agent binary (the sidecar and hold) into dir.
func BuildAgent(t testing.TB, dir string) string {
	t.Helper()
	return Build(t, dir, "fencedlease-agent", "./cmd/agent")
}
