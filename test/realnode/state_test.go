package realnode

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// printStateOnFailure prints the pods, their containers, the events of ns, the operator's
// log and the kubelets' last lines when t fails: what a real node did is otherwise lost
// with the run's folder.
func printStateOnFailure(t *testing.T, ns string) {
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(clusterState(ns))
		}
	})
}

func clusterState(ns string) string {
	var b strings.Builder
	for _, args := range [][]string{
		{"get", "nodes", "-o", "wide"},
		{"get", "pods", "-A", "-o", "wide"},
		{"-n", ns, "get", "pods", "-o", "custom-columns=NAME:.metadata.name,PHASE:.status.phase,STATE:.metadata.annotations.fencing\\.fencedlease\\.io/state,TOKEN:.metadata.annotations.fencing\\.fencedlease\\.io/token,CONTAINERS:.status.containerStatuses[*].state,INIT:.status.initContainerStatuses[*].state"},
		{"-n", ns, "get", "fencedleases", "-o", "wide"},
		{"-n", ns, "get", "events", "--sort-by=.lastTimestamp"},
		{"-n", operatorNamespace, "logs", "deployment/" + operatorDeployment, "--tail=40"},
	} {
		out, err := kubectl(args...)
		fmt.Fprintf(&b, "\n$ kubectl %s\n%s", strings.Join(args, " "), out)
		if err != nil {
			fmt.Fprintf(&b, "(%v)\n", err)
		}
	}
	for _, node := range rc.Nodes {
		fmt.Fprintf(&b, "\n--- kubelet %s, last lines:\n%s", node, tailFile(rc.LogOf("kubelet-"+node), 25))
	}
	return b.String()
}

func tailFile(path string, n int) string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n") + "\n"
}
