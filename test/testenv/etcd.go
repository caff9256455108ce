package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Etcd is a throwaway single-member etcd (the binary make envtest builds) on loopback
// ports, for tests of what is stored in etcd itself. Pause, Resume and Restart act on the
// process; the data directory survives a Restart.
type Etcd struct {
	t        testing.TB
	bin, dir string
	client   string
	peer     string
	cmd      *exec.Cmd
}

// StartEtcd starts one; it stops when the test ends.
func StartEtcd(t testing.TB) *Etcd {
	t.Helper()
	assets, err := AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	e := &Etcd{t: t, bin: filepath.Join(assets, "etcd"), dir: t.TempDir(),
		client: fmt.Sprintf("http://127.0.0.1:%d", FreePort(t)), peer: fmt.Sprintf("http://127.0.0.1:%d", FreePort(t))}
	e.start()
	t.Cleanup(func() { e.kill() })
	return e
}

// Endpoint is the client URL.
func (e *Etcd) Endpoint() string { return e.client }

func (e *Etcd) start() {
	e.t.Helper()
	e.cmd = exec.Command(e.bin, "--name=fence", "--data-dir="+filepath.Join(e.dir, "data"),
		"--listen-client-urls="+e.client, "--advertise-client-urls="+e.client,
		"--listen-peer-urls="+e.peer, "--initial-advertise-peer-urls="+e.peer,
		"--initial-cluster=fence="+e.peer, "--log-level=error")
	log, err := os.OpenFile(filepath.Join(e.dir, "etcd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		e.t.Fatal(err)
	}
	e.cmd.Stdout, e.cmd.Stderr = log, log
	if err := e.cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
}

// Pause stops the process (SIGSTOP): it keeps its connections and answers nothing.
func (e *Etcd) Pause() { _ = e.cmd.Process.Signal(syscall.SIGSTOP) }

// Resume continues a paused process.
func (e *Etcd) Resume() { _ = e.cmd.Process.Signal(syscall.SIGCONT) }

// Restart kills the process and starts it again on the same data and ports.
func (e *Etcd) Restart() {
	e.t.Helper()
	e.kill()
	time.Sleep(100 * time.Millisecond) // the ports are free again
	e.start()
}

func (e *Etcd) kill() {
	_ = e.cmd.Process.Signal(syscall.SIGCONT)
	_ = e.cmd.Process.Kill()
	_, _ = e.cmd.Process.Wait()
}
