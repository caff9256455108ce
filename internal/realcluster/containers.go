package realcluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Freeze stops every process of a pod's container with the cgroup freezer (containerd's
// task pause), as a stop-the-world pause or a frozen VM does: nothing runs, nothing is
// signalled, the kubelet still reports the container running.
func (c *Cluster) Freeze(pod *corev1.Pod, container string) error {
	return c.task(pod, container, "pause")
}

// Thaw resumes a container Freeze froze.
func (c *Cluster) Thaw(pod *corev1.Pod, container string) error {
	return c.task(pod, container, "resume")
}

func (c *Cluster) task(pod *corev1.Pod, container, verb string) error {
	n, id, err := c.containerOf(pod, container)
	if err != nil {
		return err
	}
	out, err := exec.Command(filepath.Join(c.assets, "ctr"), "--address", n.socket(), "-n", "k8s.io", "tasks", verb, id).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ctr tasks %s %s (%s/%s): %v: %s", verb, id, pod.Name, container, err, out)
	}
	return nil
}

// containerOf is the node a pod runs on and the ID of one of its containers.
func (c *Cluster) containerOf(pod *corev1.Pod, container string) (*node, string, error) {
	n := c.nodes[pod.Spec.NodeName]
	if n == nil {
		return nil, "", fmt.Errorf("pod %s is on no node of this cluster (%q)", pod.Name, pod.Spec.NodeName)
	}
	for _, s := range append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...) {
		if s.Name == container {
			if _, id, _ := strings.Cut(s.ContainerID, "://"); id != "" {
				return n, id, nil
			}
		}
	}
	return nil, "", fmt.Errorf("pod %s has no running container %s", pod.Name, container)
}

// ContainerLog is what a pod's container wrote to its current log file on its node, read
// from the node's disk: it works while the node's kubelet is down, when the API server
// cannot fetch logs. Each line keeps the runtime's prefix (time, stream, tag).
func (c *Cluster) ContainerLog(pod *corev1.Pod, container string) (string, error) {
	n := c.nodes[pod.Spec.NodeName]
	if n == nil {
		return "", fmt.Errorf("pod %s is on no node of this cluster (%q)", pod.Name, pod.Spec.NodeName)
	}
	dir := filepath.Join(n.dir, "pod-logs", fmt.Sprintf("%s_%s_%s", pod.Namespace, pod.Name, pod.UID), container)
	files, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(files) == 0 {
		return "", fmt.Errorf("no log of %s/%s in %s", pod.Name, container, dir)
	}
	newest := files[0]
	for _, f := range files[1:] {
		if a, b := restartOf(f), restartOf(newest); a > b {
			newest = f
		}
	}
	raw, err := os.ReadFile(newest)
	return string(raw), err
}

// restartOf is the restart count a container log file is named for (N.log).
func restartOf(path string) int {
	n, _ := strconv.Atoi(strings.TrimSuffix(filepath.Base(path), ".log"))
	return n
}
