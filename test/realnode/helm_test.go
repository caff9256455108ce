package realnode

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fencedlease/fencedlease/test/testenv"
)

// testHelmChart removes the bundle as the README says (make undeploy's order), installs
// the chart with the images set as the README tells users, and checks the install again.
func testHelmChart(t *testing.T) {
	root := testenv.RepoRoot()
	// The chart installs into the same namespace: undeployBundle waits until it is gone.
	undeployBundle(t)
	helm := exec.Command(filepath.Join(root, "bin", "helm"), "install", "fencedlease", filepath.Join(root, "charts", "fencedlease"),
		"-n", operatorNamespace, "--create-namespace", "--kubeconfig", rc.Kubeconfig, "--wait", "--timeout", "3m",
		"--set", "image.repository="+rc.Registry()+"/fencedlease", "--set", "image.tag=dev",
		"--set", "agentImage.repository="+rc.Registry()+"/fencedlease-agent")
	if out, err := helm.CombinedOutput(); err != nil {
		t.Fatalf("helm install: %v\n%s%s", err, out, clusterState(operatorNamespace))
	}
	printStateOnFailure(t, operatorNamespace)
	d, err := clientset(t).AppsV1().Deployments(operatorNamespace).Get(context.Background(), operatorDeployment, metav1.GetOptions{})
	must(t, err)
	c := d.Spec.Template.Spec.Containers[0]
	if want := rc.Registry() + "/fencedlease:dev"; c.Image != want {
		t.Errorf("the chart's operator image is %s, want %s", c.Image, want)
	}
	for _, e := range c.Env {
		if e.Name == "AGENT_IMAGE" && !strings.HasPrefix(e.Value, rc.Registry()+"/fencedlease-agent:") {
			t.Errorf("the chart's AGENT_IMAGE is %s, want %s/fencedlease-agent:<tag>", e.Value, rc.Registry())
		}
	}
	checkInstall(t, operatorNamespace, "fencedlease")
}

// undeployBundle removes the installed bundle as make undeploy does (every FencedLease
// first, then the operator, then the CRD) and waits until its namespace is gone.
func undeployBundle(t *testing.T) {
	t.Helper()
	undeploy := exec.Command(program("undeploy"), "-f", filepath.Join(testenv.RepoRoot(), "dist", "install.yaml"))
	undeploy.Env = append(os.Environ(), "KUBECONFIG="+rc.Kubeconfig)
	if out, err := undeploy.CombinedOutput(); err != nil {
		t.Fatalf("undeploy: %v\n%s", err, out)
	}
	if err := poll(2*time.Minute, func() bool {
		_, err := clientset(t).CoreV1().Namespaces().Get(context.Background(), operatorNamespace, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}); err != nil {
		t.Fatalf("namespace %s still there 2 minutes after undeploy", operatorNamespace)
	}
}
