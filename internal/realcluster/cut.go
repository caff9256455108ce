package realcluster

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// CutFromAPIServer drops, inside a pod's network namespace, every packet to the API server
// (the kubernetes Service's address and the server's own): the pod is cut off from the
// control plane while everything else it talks to (a database) stays reachable. One of
// its running containers names the pod's namespace; it lasts as long as the pod's sandbox.
func (c *Cluster) CutFromAPIServer(pod *corev1.Pod, container string) error {
	pid, err := c.taskPID(pod, container)
	if err != nil {
		return err
	}
	rules := fmt.Sprintf(`table inet fencedlease-cut {
	chain out {
		type filter hook output priority 0; policy accept;
		ip daddr %s tcp dport 443 drop
		ip daddr %s tcp dport 6443 drop
	}
}
`, kubernetesServiceIP(), ServerIP)
	cmd := exec.Command("nsenter", fmt.Sprintf("--net=/proc/%s/ns/net", pid), "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nft in %s's network namespace: %v: %s", pod.Name, err, out)
	}
	return nil
}

// taskPID is the host PID of a pod's running container (ctr tasks ls).
func (c *Cluster) taskPID(pod *corev1.Pod, container string) (string, error) {
	n, id, err := c.containerOf(pod, container)
	if err != nil {
		return "", err
	}
	out, err := exec.Command(filepath.Join(c.assets, "ctr"), "--address", n.socket(), "-n", "k8s.io", "tasks", "ls").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("ctr tasks ls: %v: %s", err, out)
	}
	for line := range strings.Lines(string(out)) {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == id {
			return f[1], nil
		}
	}
	return "", fmt.Errorf("no task %s (%s/%s) on %s", id, pod.Name, container, pod.Spec.NodeName)
}
