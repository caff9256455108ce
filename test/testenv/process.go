package testenv

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// serverProcess is a server a test runs as a child process: command builds its command
// afresh (same data, same ports) for each start. Pause, Resume and Restart act on it; it
// is killed when the test ends.
type serverProcess struct {
	t       testing.TB
	log     string
	command func() *exec.Cmd
	cmd     *exec.Cmd
}

func startProcess(t testing.TB, log string, command func() *exec.Cmd) *serverProcess {
	t.Helper()
	p := &serverProcess{t: t, log: log, command: command}
	p.start()
	t.Cleanup(p.kill)
	return p
}

func (p *serverProcess) start() {
	p.t.Helper()
	p.cmd = p.command()
	log, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		p.t.Fatal(err)
	}
	p.cmd.Stdout, p.cmd.Stderr = log, log
	if err := p.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
}

// Pause stops the process (SIGSTOP): it keeps its connections and answers nothing. It
// returns once every thread has stopped: the signal is delivered to each as it next
// leaves the kernel, and a thread that was busy (on a loaded machine, say) could
// otherwise answer one more request after Pause returned.
func (p *serverProcess) Pause() {
	_ = p.cmd.Process.Signal(syscall.SIGSTOP)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if allStopped(p.cmd.Process.Pid) {
			return
		}
	}
	p.t.Errorf("the server (pid %d) did not stop within 5 s of SIGSTOP", p.cmd.Process.Pid)
}

// allStopped is true when every thread of pid is in state T (stopped), from /proc.
func allStopped(pid int) bool {
	stats, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil || len(stats) == 0 {
		return false
	}
	for _, path := range stats {
		raw, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		// pid (comm) state ...: comm may hold spaces and parentheses, the state follows the last ')'.
		rest := raw[bytes.LastIndexByte(raw, ')')+1:]
		if f := bytes.Fields(rest); len(f) == 0 || string(f[0]) != "T" {
			return false
		}
	}
	return true
}

// Resume continues a paused process.
func (p *serverProcess) Resume() { _ = p.cmd.Process.Signal(syscall.SIGCONT) }

// Restart kills the process (a crash: no clean shutdown) and starts it again.
func (p *serverProcess) Restart() {
	p.t.Helper()
	p.kill()
	time.Sleep(200 * time.Millisecond) // the ports are free again
	p.start()
}

func (p *serverProcess) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	_ = p.cmd.Process.Kill()
	_, _ = p.cmd.Process.Wait()
}
