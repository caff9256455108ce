package testenv

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Backoff is how long a supervisor waits before it restarts a replica that exited: First,
// doubling up to Max, and First again once a run lasted Reset.
type Backoff struct {
	First, Max, Reset time.Duration
}

// KubeletBackoff is the kubelet's CrashLoopBackOff: 10 s doubling to 5 min, reset after
// 10 min of running.
var KubeletBackoff = Backoff{First: 10 * time.Second, Max: 5 * time.Minute, Reset: 10 * time.Minute}

// next is the delay after a run that lasted ran, when the last delay was last (0: none yet).
func (b Backoff) next(last, ran time.Duration) time.Duration {
	if last == 0 || ran >= b.Reset {
		return b.First
	}
	return min(2*last, b.Max)
}

// Supervisor runs the operator binary as one replica and restarts it whenever it exits,
// after a back-off, as a kubelet restarts a container. Its API user and kubeconfig are
// made once, before the first start, so a restart never reads the control plane's state
// while a test may be restarting the API server.
type Supervisor struct {
	name       string
	bin        string
	kubeconfig string
	args       []string
	backoff    Backoff

	stop context.CancelFunc
	done chan struct{}

	mu    sync.Mutex
	runs  []*Manager
	exits []time.Time
	err   error
}

// Supervise starts bin as replica name (flags args) and keeps it running until the test
// ends, restarting it after b whenever it exits.
func Supervise(t testing.TB, env *envtest.Environment, bin, dir, name string, b Backoff, args ...string) *Supervisor {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	s := &Supervisor{name: name, bin: bin, kubeconfig: ManagerUser(t, env, dir, name), args: args, backoff: b,
		stop: stop, done: make(chan struct{})}
	first, err := s.start()
	if err != nil {
		t.Fatal(err)
	}
	go s.loop(ctx, first)
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() || os.Getenv("MANAGER_LOGS") != "" {
			s.mu.Lock()
			runs := s.runs[max(0, len(s.runs)-2):]
			s.mu.Unlock()
			for _, m := range runs {
				t.Logf("%s stderr (tail):\n%s", m.Name, tail(m.Stderr.String(), 4000))
			}
		}
	})
	return s
}

func (s *Supervisor) start() (*Manager, error) {
	s.mu.Lock()
	n := len(s.runs)
	s.mu.Unlock()
	m, err := startManager(s.bin, s.kubeconfig, fmt.Sprintf("%s-run%d", s.name, n), s.args)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.runs = append(s.runs, m)
	s.mu.Unlock()
	return m, nil
}

func (s *Supervisor) loop(ctx context.Context, m *Manager) {
	defer close(s.done)
	var delay time.Duration
	for {
		began := time.Now()
		select {
		case <-ctx.Done():
			m.Kill()
			return
		case <-m.Done():
		}
		s.mu.Lock()
		s.exits = append(s.exits, time.Now())
		s.mu.Unlock()
		delay = s.backoff.next(delay, time.Since(began))
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		var err error
		if m, err = s.start(); err != nil {
			s.mu.Lock()
			s.err = err
			s.mu.Unlock()
			return
		}
	}
}

// Stop ends the supervision and kills the running replica.
func (s *Supervisor) Stop() {
	s.stop()
	<-s.done
}

// Current is the replica's latest run (it may have exited and wait for its restart).
func (s *Supervisor) Current() *Manager {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runs[len(s.runs)-1]
}

// Running is the replica's run while it runs, or nil while it waits for a restart.
func (s *Supervisor) Running() *Manager {
	if m := s.Current(); !m.Exited() {
		return m
	}
	return nil
}

// Exits is when the replica's runs exited so far.
func (s *Supervisor) Exits() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.exits...)
}

// Err is why the supervisor could not restart the replica, or nil.
func (s *Supervisor) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Name is the replica's name; its runs are named name-runN.
func (s *Supervisor) Name() string { return s.name }
