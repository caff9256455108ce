package realcluster

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
	"k8s.io/client-go/tools/clientcmd"
)

// The cluster's API server listens inside the namespace only. RunInNetns forwards a port
// of the machine's loopback to it, so kubectl and the plugin reach the cluster from the
// machine with a kubeconfig (HostKubeconfig), no nsenter: a connection to 127.0.0.1:port
// on the machine is one to ServerIP:6443 inside the namespace, and nothing else is
// reachable through it.

// forwardPortEnv tells the run inside the namespace which loopback port reaches its API
// server from the machine.
const forwardPortEnv = "FENCEDLEASE_FORWARD_PORT"

// apiServerPort is the port the API server listens on inside the namespace.
const apiServerPort = "6443"

// forward listens on 127.0.0.1 (port 0: any free one) of the machine and passes every
// connection to the API server inside the namespace. It returns the port and a stop.
func forward(port int) (int, func(), error) {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return 0, nil, fmt.Errorf("forwarding a loopback port to the cluster's API server: %w", err)
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go pass(c)
		}
	}()
	return l.Addr().(*net.TCPAddr).Port, func() { l.Close() }, nil
}

// pass copies one connection to the API server inside the namespace and back.
func pass(c net.Conn) {
	defer c.Close()
	up, err := dialInNetns(net.JoinHostPort(ServerIP, apiServerPort))
	if err != nil {
		fmt.Fprintf(os.Stderr, "realcluster: forward: %v\n", err)
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); closeWrite(up); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); closeWrite(c); done <- struct{}{} }()
	<-done
	<-done
}

func closeWrite(c net.Conn) {
	if t, ok := c.(*net.TCPConn); ok {
		_ = t.CloseWrite()
	}
}

// dialInNetns connects to addr from inside the cluster's namespace: the socket is made on
// a thread moved into the namespace, and stays there once the thread moves back.
func dialInNetns(addr string) (net.Conn, error) {
	target, err := os.Open("/run/netns/" + Netns)
	if err != nil {
		return nil, err
	}
	defer target.Close()
	runtime.LockOSThread()
	home, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	defer home.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("entering the namespace: %w", err)
	}
	conn, dialErr := net.Dial("tcp", addr)
	if err := unix.Setns(int(home.Fd()), unix.CLONE_NEWNET); err != nil {
		// The thread stays locked, and dies with its goroutine: it is in the wrong namespace.
		if conn != nil {
			conn.Close()
		}
		return nil, errors.Join(dialErr, fmt.Errorf("leaving the namespace: %w", err))
	}
	runtime.UnlockOSThread()
	return conn, dialErr
}

// writeHostKubeconfig writes, beside the cluster-admin kubeconfig, one whose server is the
// machine's loopback port that RunInNetns forwards to the API server; "" when none is
// (the cluster was not started through RunInNetns).
func (c *Cluster) writeHostKubeconfig() (string, error) {
	port := os.Getenv(forwardPortEnv)
	if port == "" {
		return "", nil
	}
	cfg, err := clientcmd.LoadFromFile(c.Kubeconfig)
	if err != nil {
		return "", err
	}
	for _, cluster := range cfg.Clusters {
		cluster.Server = "https://" + net.JoinHostPort("127.0.0.1", port)
	}
	path := c.Kubeconfig[:len(c.Kubeconfig)-len(".kubeconfig")] + "-host.kubeconfig"
	return path, clientcmd.WriteToFile(*cfg, path)
}
