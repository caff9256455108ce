package realcluster

import (
	"fmt"
	"io/fs"
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

// StartKubelet starts a node's kubelet again; it adopts the containers it finds.
func (c *Cluster) StartKubelet(node string) error {
	n := c.nodes[node]
	if n == nil {
		return fmt.Errorf("no node %s", node)
	}
	return c.startKubelet(n)
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
	for range 30 {
		if err := c.startKubelet(n); err != nil {
			return err
		}
		select {
		case <-c.exited[n.kubelet]:
			time.Sleep(time.Second)
		case <-time.After(3 * time.Second):
			return nil // still running: it got past its start-up checks
		}
	}
	return fmt.Errorf("the kubelet of %s kept exiting at start (log %s)", node, c.LogOf("kubelet-"+node))
}
