package testenv

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
)

// Etcd is a throwaway single-member etcd (the binary make envtest builds) on loopback
// ports, for tests of what is stored in etcd itself. Pause, Resume and Restart act on the
// process; the data directory survives a Restart.
type Etcd struct {
	*serverProcess
	client string
}

// StartEtcd starts one; it stops when the test ends.
func StartEtcd(t testing.TB) *Etcd {
	t.Helper()
	assets, err := AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	client, peer := fmt.Sprintf("http://127.0.0.1:%d", FreePort(t)), fmt.Sprintf("http://127.0.0.1:%d", FreePort(t))
	e := &Etcd{client: client}
	e.serverProcess = startProcess(t, filepath.Join(dir, "etcd.log"), func() *exec.Cmd {
		return exec.Command(filepath.Join(assets, "etcd"), "--name=fence", "--data-dir="+filepath.Join(dir, "data"),
			"--listen-client-urls="+client, "--advertise-client-urls="+client,
			"--listen-peer-urls="+peer, "--initial-advertise-peer-urls="+peer,
			"--initial-cluster=fence="+peer, "--log-level=error")
	})
	return e
}

// Endpoint is the client URL.
func (e *Etcd) Endpoint() string { return e.client }
