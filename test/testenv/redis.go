package testenv

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
)

// Redis is a throwaway redis-server (Debian's; .ci/run installs it) on a loopback port.
// Pause, Resume and Restart act on the process; with appendonly it keeps its data across
// a Restart, without it (and with no snapshots) it loses everything.
type Redis struct {
	*serverProcess
	port int
}

// StartRedis starts one; it stops when the test ends. appendOnly turns the AOF on (fsync
// always), so a restart keeps every acknowledged write.
func StartRedis(t testing.TB, appendOnly bool) *Redis {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatal("redis-server is not installed (apt-get install redis-server); .ci/run installs it")
	}
	dir := t.TempDir()
	r := &Redis{port: FreePort(t)}
	aof := "no"
	if appendOnly {
		aof = "yes"
	}
	r.serverProcess = startProcess(t, filepath.Join(dir, "redis.log"), func() *exec.Cmd {
		return exec.Command("redis-server", "--port", fmt.Sprint(r.port), "--bind", "127.0.0.1", "--dir", dir,
			"--save", "", "--appendonly", aof, "--appendfsync", "always", "--daemonize", "no", "--protected-mode", "no")
	})
	return r
}

// Addr is host:port.
func (r *Redis) Addr() string { return fmt.Sprintf("127.0.0.1:%d", r.port) }
