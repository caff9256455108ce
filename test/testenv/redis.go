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

// Redis is a throwaway redis-server (Debian's; .ci/run installs it) on a loopback port.
// Pause, Resume and Restart act on the process; with appendonly it keeps its data across
// a Restart, without it (and with no snapshots) it loses everything.
type Redis struct {
	t        testing.TB
	dir      string
	port     int
	appendix bool
	cmd      *exec.Cmd
}

// StartRedis starts one; it stops when the test ends. appendOnly turns the AOF on (fsync
// always), so a restart keeps every acknowledged write.
func StartRedis(t testing.TB, appendOnly bool) *Redis {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatal("redis-server is not installed (apt-get install redis-server); .ci/run installs it")
	}
	r := &Redis{t: t, dir: t.TempDir(), port: FreePort(t), appendix: appendOnly}
	r.start()
	t.Cleanup(r.kill)
	return r
}

// Addr is host:port.
func (r *Redis) Addr() string { return fmt.Sprintf("127.0.0.1:%d", r.port) }

func (r *Redis) start() {
	r.t.Helper()
	aof := "no"
	if r.appendix {
		aof = "yes"
	}
	r.cmd = exec.Command("redis-server", "--port", fmt.Sprint(r.port), "--bind", "127.0.0.1", "--dir", r.dir,
		"--save", "", "--appendonly", aof, "--appendfsync", "always", "--daemonize", "no", "--protected-mode", "no")
	log, err := os.OpenFile(filepath.Join(r.dir, "redis.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		r.t.Fatal(err)
	}
	r.cmd.Stdout, r.cmd.Stderr = log, log
	if err := r.cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
}

// Pause stops the process (SIGSTOP).
func (r *Redis) Pause() { _ = r.cmd.Process.Signal(syscall.SIGSTOP) }

// Resume continues a paused process.
func (r *Redis) Resume() { _ = r.cmd.Process.Signal(syscall.SIGCONT) }

// Restart kills the process (no clean shutdown: no last snapshot) and starts it again.
func (r *Redis) Restart() {
	r.t.Helper()
	r.kill()
	time.Sleep(100 * time.Millisecond)
	r.start()
}

func (r *Redis) kill() {
	_ = r.cmd.Process.Signal(syscall.SIGCONT)
	_ = r.cmd.Process.Kill()
	_, _ = r.cmd.Process.Wait()
}
