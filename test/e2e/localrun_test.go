// Package e2e runs the fencedlease binary as a user would.
package e2e

import (
	"cmp"
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/fencedlease/fencedlease/controllers/admissioncheck"
	"github.com/fencedlease/fencedlease/test/testenv"
)

// TestLocalRun is `make run` on a machine with no cluster: the binary starts its own
// control plane, prints where it is, and grants the sample pod token 1.
func TestLocalRun(t *testing.T) {
	root := testenv.RepoRoot()
	assets, err := testenv.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := testenv.BuildOperator(t, dir)

	kubeconfig := filepath.Join(dir, "local.kubeconfig")
	var stderr testenv.LockedBuffer
	cmd := exec.Command(bin, "--local-control-plane=auto", "--leader-elect=false", "--webhook=false", // as make run
		"--metrics-bind-address=0", "--health-probe-bind-address=0",
		"--local-control-plane-assets="+assets, "--local-kubeconfig="+kubeconfig)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "KUBECONFIG=", "KUBERNETES_SERVICE_HOST=", "HOME="+dir)
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-exited
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var c client.Client
	var host string // the embedded API server, https://127.0.0.1:PORT
	if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		raw, err := os.ReadFile(kubeconfig)
		if err != nil {
			return false, nil
		}
		cfg, err := clientcmd.RESTConfigFromKubeConfig(raw)
		if err != nil {
			return false, err
		}
		host = cfg.Host
		c, err = client.New(cfg, client.Options{})
		return err == nil, err
	}); err != nil {
		t.Fatalf("no kubeconfig written: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "export KUBECONFIG="+kubeconfig) {
		t.Errorf("the binary did not tell how to reach its control plane:\n%s", stderr.String())
	}

	// As kubectl apply -k orders them: the FencedLease before the pods that name it.
	objs := samples(t, filepath.Join(root, "config", "samples"))
	slices.SortStableFunc(objs, func(a, b *unstructured.Unstructured) int {
		return cmp.Compare(kindOrder(a), kindOrder(b))
	})
	for _, obj := range objs {
		obj.SetNamespace("default")
		var lastErr error
		if err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			lastErr = c.Create(ctx, obj) // the CRD and the policies may still be settling
			return lastErr == nil, nil
		}); err != nil {
			t.Fatalf("creating sample %s: %v (last: %v)", obj.GetName(), err, lastErr)
		}
	}

	// The mutating policy admitted the sample pod (no webhook is installed), and the
	// policies refuse the local admin a forged token.
	pod := &corev1.Pod{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: "default", Name: "invoice-run-1"}, pod); err != nil {
		t.Fatal(err)
	}
	if pod.Annotations["fencing.fencedlease.io/state"] == "" || len(pod.Spec.Containers[0].Env) == 0 {
		t.Errorf("the sample pod was not admitted as a candidate: %v", pod.Annotations)
	}
	hooks := &admissionregistrationv1.MutatingWebhookConfigurationList{}
	if err := c.List(ctx, hooks); err != nil || len(hooks.Items) != 0 {
		t.Errorf("the embedded control plane has webhook configurations: %v %v", hooks.Items, err)
	}
	if err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		p := &corev1.Pod{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: "default", Name: "invoice-run-1"}, p); err != nil {
			return false, err
		}
		p.Annotations["fencing.fencedlease.io/token"] = "999"
		err := c.Update(ctx, p)
		return err != nil && strings.Contains(err.Error(), "written by the operator alone"), nil
	}); err != nil {
		t.Errorf("the local admin could forge a token on the embedded control plane: %v", err)
	}

	fl := &unstructured.Unstructured{}
	fl.SetAPIVersion("fencing.fencedlease.io/v1alpha1")
	fl.SetKind("FencedLease")
	if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, types.NamespacedName{Namespace: "default", Name: "invoices-tenant-7"}, fl); err != nil {
			return false, nil
		}
		holder, _, _ := unstructured.NestedString(fl.Object, "status", "holder", "podName")
		token, _, _ := unstructured.NestedInt64(fl.Object, "status", "fencingToken")
		return holder == "invoice-run-1" && token == 1, nil
	}); err != nil {
		t.Fatalf("sample pod not granted token 1: %v\nstatus: %v\n%s", err, fl.Object["status"], stderr.String())
	}

	// The operator checked at start that its policies are installed and name it, and that
	// the mutating policy admits candidates.
	if out := stderr.String(); strings.Count(out, "admission policy in place") != len(admissioncheck.Policies)+1 || strings.Contains(out, "NOT in place") ||
		!strings.Contains(out, `"by":"MutatingAdmissionPolicy fencedlease-candidate"`) {
		t.Errorf("the start-up check did not find the %d policies and candidate admission in place:\n%s", len(admissioncheck.Policies), out)
	}

	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit after SIGINT: %v\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("still running 30s after SIGINT")
	}
	// The embedded kube-apiserver must not outlive the operator.
	u, err := url.Parse(host)
	if err != nil || u.Port() == "" {
		t.Fatalf("API server address %q has no port", host)
	}
	port := u.Port()
	if out, err := exec.Command("pgrep", "-f", "kube-apiserver.*--secure-port="+port).Output(); err == nil {
		t.Fatalf("kube-apiserver (pid %s) still running after the operator exited", strings.TrimSpace(string(out)))
	}
}

// kindOrder puts FencedLeases first.
func kindOrder(o *unstructured.Unstructured) int {
	if o.GetKind() == "FencedLease" {
		return 0
	}
	return 1
}

// samples reads every object in config/samples except the kustomization.
func samples(t *testing.T, dir string) []*unstructured.Unstructured {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var out []*unstructured.Unstructured
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range strings.Split(string(raw), "\n---\n") {
			obj := map[string]any{}
			if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if len(obj) > 0 {
				out = append(out, &unstructured.Unstructured{Object: obj})
			}
		}
	}
	return out
}
