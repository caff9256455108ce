package testenv

import (
	"os"
	"os/exec"
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

// Pause stops the process (SIGSTOP): it keeps its connections and answers nothing.
func (p *serverProcess) Pause() { _ = p.cmd.Process.Signal(syscall.SIGSTOP) }

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
