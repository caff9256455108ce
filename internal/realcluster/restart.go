package realcluster

import (
	"fmt"
	"io/fs"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// StopKubelet stops a node's kubelet as a crash does (SIGKILL): its containers, their
// shims and containerd keep running.
func (c *Cluster) StopKubelet(node string) error {
	n := c.nodes[node]
	if n == nil {
		return fmt.Errorf("no node %s", node)
	}
	return c.stop(n.kubelet)
}

// StartKubelet starts a node's kubelet again and returns once it serves its health
// endpoint; it adopts the containers it finds.
func (c *Cluster) StartKubelet(node string) error {
	n := c.nodes[node]
	if n == nil {
		return fmt.Errorf("no node %s", node)
	}
	return c.startKubeletHealthy(n)
}

// RestartContainerd stops a node's containerd (SIGKILL) and starts it again: the shims
// keep the containers running and the new containerd reconnects to them.
func (c *Cluster) RestartContainerd(node string) error {
	n := c.nodes[node]
	if n == nil {
		return fmt.Errorf("no node %s", node)
	}
	if err := c.stop(n.containerd); err != nil {
		return err
	}
	return c.startContainerd(n)
}

// stop kills a component's process group and waits until its process has ended.
func (c *Cluster) stop(cmd *exec.Cmd) error {
	if cmd == nil || cmd.Process == nil {
		return nil
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-c.exited[cmd]:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("pid %d did not end 10 s after SIGKILL", cmd.Process.Pid)
	}
}

// KillNode makes a node die as a machine does: its kubelet, its containerd and every
// process of its containers and sandboxes are killed at once (SIGKILL, the frozen thawed
// first). Nothing on the node reports or renews any more; StartNode boots it again.
func (c *Cluster) KillNode(node string) error {
	n := c.nodes[node]
	if n == nil {
		return fmt.Errorf("no node %s", node)
	}
	if err := c.stop(n.kubelet); err != nil {
		return err
	}
	if err := c.stop(n.containerd); err != nil {
		return err
	}
	thaw()
	for _, h := range cgroupHierarchies() {
		root := filepath.Join(h, strings.TrimPrefix(n.cgroupRoot(), "/"))
		_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && d.Name() == "cgroup.procs" {
				killPids(path)
			}
			return nil
		})
	}
	return nil
}

// StartNode starts a node KillNode killed: containerd, then the kubelet, which finds its
// containers dead and starts again what its pods' restart policies say. A kubelet that
// starts while containerd's CRI service is still initializing exits at once; it is
// started again, as systemd restarts it on a machine.
func (c *Cluster) StartNode(node string) error {
	n := c.nodes[node]
	if n == nil {
		return fmt.Errorf("no node %s", node)
	}
	if err := c.startContainerd(n); err != nil {
		return err
	}
	return c.startKubeletHealthy(n)
}

// startKubeletHealthy starts the node's kubelet and waits until its health endpoint
// answers. One that exits at start (its runtime not answering yet, after a restart) is
// started again. Returning sooner, a caller that next restarts containerd could kill the
// kubelet in its start-up checks: the node stays Ready for the grace period, so waiting
// for Ready would not tell.
func (c *Cluster) startKubeletHealthy(n *node) error {
	url := fmt.Sprintf("http://127.0.0.1:%d/healthz", n.spec.port+1)
	for range 30 {
		if err := c.startKubelet(n); err != nil {
			return err
		}
		switch untilHealthy(url, c.exited[n.kubelet], time.Minute) {
		case kubeletHealthy:
			return nil
		case kubeletExited:
			time.Sleep(time.Second)
		default:
			return fmt.Errorf("the kubelet of %s did not answer on %s within a minute (log %s)", n.spec.name, url, c.LogOf("kubelet-"+n.spec.name))
		}
	}
	return fmt.Errorf("the kubelet of %s kept exiting at start (log %s)", n.spec.name, c.LogOf("kubelet-"+n.spec.name))
}

// What became of a started kubelet: it answered, it exited, or neither within the wait.
const (
	kubeletHealthy = iota
	kubeletExited
	kubeletSilent
)

// untilHealthy polls url every 100 ms until it answers 200, exited closes, or wait passes.
func untilHealthy(url string, exited <-chan struct{}, wait time.Duration) int {
	deadline := time.Now().Add(wait)
	for {
		if healthy(url) {
			return kubeletHealthy
		}
		if time.Now().After(deadline) {
			return kubeletSilent
		}
		select {
		case <-exited:
			return kubeletExited
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// healthy is true when url answers 200.
func healthy(url string) bool {
	client := http.Client{Timeout: time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
