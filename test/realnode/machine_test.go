package realnode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// testFromTheMachine: the cluster is reached from outside its network namespace, as make
// cluster's user reaches it — kubectl and the kubectl plugin with the host kubeconfig,
// through the loopback port RunInNetns forwards into the namespace, no nsenter — and
// the forward listens on the loopback only.
func testFromTheMachine(t *testing.T) {
	if rc.HostKubeconfig == "" {
		t.Fatal("no host kubeconfig: the cluster was not started through RunInNetns")
	}
	cfg, err := clientcmd.LoadFromFile(rc.HostKubeconfig)
	must(t, err)
	for name, cluster := range cfg.Clusters {
		if !strings.HasPrefix(cluster.Server, "https://127.0.0.1:") {
			t.Fatalf("cluster %s of the host kubeconfig: server %s, want a port on 127.0.0.1", name, cluster.Server)
		}
	}
	// The parent process, outside the namespace, started this one: its namespace is the
	// machine's.
	machine := fmt.Sprintf("/proc/%d/ns/net", os.Getppid())
	onMachine := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("nsenter", append([]string{"--net=" + machine, "--"}, args...)...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+rc.HostKubeconfig)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("on the machine, %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	out := onMachine("kubectl", "get", "nodes", "-o", "name", "--request-timeout=30s")
	for _, n := range rc.Nodes {
		if !strings.Contains(out, "node/"+n) {
			t.Fatalf("kubectl get nodes on the machine shows %q, want node %s", out, n)
		}
	}
	ns := "from-the-machine"
	newNamespace(t, ns)
	must(t, rc.Client.Create(context.Background(), &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "reports"},
		Spec: fencingv1.FencedLeaseSpec{LeaseDurationSeconds: 10}}))
	if out := onMachine(program("kubectl-fencedlease"), "status", "reports", "-n", ns); !strings.Contains(out, "reports") {
		t.Fatalf("kubectl fencedlease status on the machine: %q, want the FencedLease", out)
	}
}
