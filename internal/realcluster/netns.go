package realcluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// The real cluster lives in a network namespace of its own: the control plane, the
// registry, the nodes' kubelets and containerds, the pods' bridges, kube-proxy's rules and
// the tests' PostgreSQL. Nothing of it is reachable from the machine's network, nor it
// from there: every address below exists only inside that namespace, and deleting the
// namespace removes every interface, route and nftables rule the run made.
const (
	// Netns is the network namespace's name (ip netns list).
	Netns = "fencedlease"
	// netnsEnv is set in the run inside the namespace.
	netnsEnv = "FENCEDLEASE_NETNS"
	// ServerIP is the control plane's, the registry's and the tests' servers' address.
	ServerIP = "198.18.0.1"
	// ServiceCIDR holds the Services' cluster IPs.
	ServiceCIDR = "198.18.128.0/24"
	// PodCIDR holds every node's pod range.
	PodCIDR = "198.18.16.0/20"
)

// InNetns tells whether this process runs inside the real cluster's network namespace.
func InNetns() bool { return os.Getenv(netnsEnv) != "" }

// RunInNetns runs this program again inside a new network namespace, as root, waits for
// it and cleans up all the run made (Cleanup), and returns its exit code. A SIGINT or
// SIGTERM to this process is passed on. While it runs, a port of the machine's loopback
// (FENCEDLEASE_FORWARD_PORT, or any free one) is forwarded to the API server inside (see
// Cluster.HostKubeconfig). Only one run at a time: a second one fails at once.
func RunInNetns() (int, error) {
	if os.Geteuid() != 0 {
		return 0, errors.New("real nodes need root (a kubelet, containerd, runc, a network namespace): run as root")
	}
	unlock, err := lock()
	if err != nil {
		return 0, err
	}
	defer unlock()
	if err := Cleanup(); err != nil {
		return 0, fmt.Errorf("cleaning up an earlier run: %w", err)
	}
	if err := makeNetns(); err != nil {
		_ = Cleanup()
		return 0, err
	}
	self, err := os.Executable()
	if err != nil {
		return 0, err
	}
	want, _ := strconv.Atoi(os.Getenv(forwardPortEnv)) // a port asked for, or any free one
	port, stopForward, err := forward(want)
	if err != nil {
		_ = Cleanup()
		return 0, err
	}
	defer stopForward()
	cmd := exec.Command("nsenter", append([]string{"--net=/run/netns/" + Netns, "--", self}, os.Args[1:]...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), netnsEnv+"="+Netns, forwardPortEnv+"="+strconv.Itoa(port))
	// Killed with this process, so the next run's Cleanup finds no run still going.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	if err := cmd.Start(); err != nil {
		_ = Cleanup()
		return 0, err
	}
	go func() {
		for s := range sig {
			_ = cmd.Process.Signal(s)
		}
	}()
	err = cmd.Wait()
	code := cmd.ProcessState.ExitCode()
	if cerr := Cleanup(); cerr != nil {
		fmt.Fprintf(os.Stderr, "realcluster: clean-up: %v\n", cerr)
		if code == 0 {
			code = 1
		}
	}
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		return 1, err
	}
	return code, nil
}

func lock() (func(), error) {
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "fencedlease-realnode.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, errors.New("another real cluster is running on this machine (make cluster, or a test run); stop it first")
	}
	return func() { f.Close() }, nil
}

// makeNetns creates the namespace with its loopback holding the servers' address and each
// node's (this machine kind's kernel has no dummy interfaces; a kubelet refuses only
// 127.0.0.0/8 as node IP, not the interface), and lets it route between the nodes' bridges.
func makeNetns() error {
	steps := [][]string{
		{"ip", "netns", "add", Netns},
		{"ip", "-n", Netns, "link", "set", "lo", "up"},
		{"ip", "-n", Netns, "addr", "add", ServerIP + "/32", "dev", "lo"},
	}
	for _, n := range nodeSpecs {
		steps = append(steps, []string{"ip", "-n", Netns, "addr", "add", n.ip + "/32", "dev", "lo"})
	}
	steps = append(steps, []string{"nsenter", "--net=/run/netns/" + Netns, "sysctl", "-qw", "net.ipv4.ip_forward=1"},
		// A route for the Services' range, so the namespace's own processes (the API server
		// calling the webhook) get past routing to kube-proxy's DNAT; the namespace has no
		// other way out, so nothing leaves it.
		[]string{"ip", "-n", Netns, "route", "add", ServiceCIDR, "dev", "lo"})
	for _, s := range steps {
		if out, err := exec.Command(s[0], s[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %v: %s", strings.Join(s, " "), err, out)
		}
	}
	return nil
}
