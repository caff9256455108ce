package testenv

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// ReplicaFlags run the binary as one of several replicas against a test control plane:
// leader election with short timings (a 3 s lease, so a pause can outlast it), no webhook,
// no probe endpoint.
var ReplicaFlags = []string{
	"--leader-elect=true", "--leader-election-namespace=default",
	"--leader-election-lease-duration=3s", "--leader-election-renew-deadline=2s", "--leader-election-retry-period=500ms",
	"--webhook=false", "--health-probe-bind-address=0",
}

// Manager is a fencedlease binary running as its own API user, so an audit log tells its
// requests apart.
type Manager struct {
	Name   string
	Cmd    *exec.Cmd
	Stderr *LockedBuffer

	// MetricsAddr is where /metrics is served (host:port).
	MetricsAddr string

	metrics string
	done    chan struct{}
}

// StartManager runs bin with args (a metrics address is added; /metrics is plain HTTP unless
// args say --metrics-secure) as user name, a cluster admin of env. It is killed when the test ends.
func StartManager(t testing.TB, env *envtest.Environment, bin, dir, name string, args ...string) *Manager {
	t.Helper()
	return startManagerFrom(t, ManagerUser(t, env, dir, name), bin, name, args)
}

// StartManagerAs is StartManager with the operator acting as user as, in groups, through
// its kubeconfig's impersonation, the way it acts as its service account in a cluster: so
// the API server authorizes and prioritizes (API Priority and Fairness) its requests as
// that user's. name stays the authenticated user, which an audit policy matches.
func StartManagerAs(t testing.TB, env *envtest.Environment, bin, dir, name, as string, groups []string, args ...string) *Manager {
	t.Helper()
	path := ManagerUser(t, env, dir, name)
	kubeconfig, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, auth := range kubeconfig.AuthInfos {
		auth.Impersonate, auth.ImpersonateGroups = as, groups
	}
	if err := clientcmd.WriteToFile(*kubeconfig, path); err != nil {
		t.Fatal(err)
	}
	return startManagerFrom(t, path, bin, name, args)
}

func startManagerFrom(t testing.TB, kubeconfig, bin, name string, args []string) *Manager {
	t.Helper()
	m, err := startManager(bin, kubeconfig, name, args)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		m.Kill()
		if t.Failed() || os.Getenv("MANAGER_LOGS") != "" {
			t.Logf("%s stderr (tail):\n%s", name, tail(m.Stderr.String(), 4000))
		}
	})
	return m
}

// ManagerUser makes name a cluster admin of env and writes its kubeconfig into dir,
// returning the file's path. It reads the control plane's state: call it while nothing
// restarts the API server.
func ManagerUser(t testing.TB, env *envtest.Environment, dir, name string) string {
	t.Helper()
	user, err := env.AddUser(envtest.User{Name: name, Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name+".kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// startManager runs bin with the kubeconfig at path; it touches no test state, so a
// supervisor may call it from its own goroutine.
func startManager(bin, kubeconfig, name string, args []string) (*Manager, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	m := &Manager{Name: name, Stderr: &LockedBuffer{}, MetricsAddr: addr, metrics: "http://" + addr + "/metrics", done: make(chan struct{})}
	// Plain HTTP, so tests scrape without a token; args may say otherwise (the last flag wins).
	m.Cmd = exec.Command(bin, append([]string{"--metrics-secure=false"}, append(args, "--metrics-bind-address="+addr)...)...)
	m.Cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	m.Cmd.Stderr = m.Stderr
	if err := m.Cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = m.Cmd.Wait(); close(m.done) }()
	return m, nil
}

// Kill stops the process at once (a stopped one too) and waits for it.
func (m *Manager) Kill() {
	_ = m.Cmd.Process.Signal(syscall.SIGCONT)
	_ = m.Cmd.Process.Kill()
	<-m.done
}

// Exited is true once the process ended.
func (m *Manager) Exited() bool {
	select {
	case <-m.done:
		return true
	default:
		return false
	}
}

// Done is closed when the process ended.
func (m *Manager) Done() <-chan struct{} { return m.done }

// Scrape reads the manager's /metrics page.
func (m *Manager) Scrape(timeout time.Duration) (string, error) {
	hc := http.Client{Timeout: timeout}
	resp, err := hc.Get(m.metrics)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	return string(raw), err
}

// Leading reads the manager's leader_election_master_status gauge.
func (m *Manager) Leading() bool {
	page, err := m.Scrape(time.Second)
	if err != nil {
		return false
	}
	families, err := ParseMetrics(page)
	if err != nil {
		return false
	}
	for _, s := range families["leader_election_master_status"].GetMetric() {
		if s.GetGauge().GetValue() == 1 {
			return true
		}
	}
	return false
}

// FreePort is a TCP port on 127.0.0.1 free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// LockedBuffer collects a child's output while the test reads it.
type LockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *LockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *LockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
