// Package realnode is the product as shipped on real nodes: the images of make images
// pulled from a registry by two kubelets with containerd and runc, the operator installed
// from dist/install.yaml, and the protocol on real containers (frozen with the cgroup
// freezer, not SIGSTOP of a local process). It needs root; the whole run lives in a
// network namespace of its own (internal/realcluster).
package realnode

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/fencedlease/fencedlease/internal/realcluster"
	"github.com/fencedlease/fencedlease/test/testenv"
)

// long adds the rounds make test leaves to make chaos: the upgrade spec's rollback to the
// previous release and second upgrade, and the operator's memory with 1,000 FencedLeases.
var long = flag.Bool("realnode.long", false, "Also run the long rounds: the upgrade spec's rollback and second upgrade, the operator's memory with 1,000 FencedLeases (make chaos).")

// rc is the cluster every spec shares, with the operator installed from the bundle.
var rc *realcluster.Cluster

// bundleAvailableIn is how long the operator took from kubectl apply of the bundle to
// Available; installBound is what the install spec allows it, with room for a loaded
// machine (docs/operations.md has what was measured).
var bundleAvailableIn time.Duration

const installBound = 45 * time.Second

func TestMain(m *testing.M) {
	if !realcluster.InNetns() {
		if os.Geteuid() != 0 {
			msg := "realnode: NOT RUN: real nodes need root (a kubelet, containerd, runc, a network namespace)"
			if os.Getenv("CI") != "" {
				fmt.Println(msg + "; CI runs as root, so this is a failure")
				os.Exit(1)
			}
			fmt.Println(msg + "; run make test as root")
			os.Exit(0)
		}
		// Built out here: the namespace has no network, and go build may need the module proxy.
		built := time.Now()
		dir, err := os.MkdirTemp("", "realnode-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "realnode:", err)
			os.Exit(1)
		}
		defer os.RemoveAll(dir)
		for name, pkg := range map[string]string{"kubectl-fencedlease": "./cmd/kubectl-fencedlease", "undeploy": "./hack/undeploy"} {
			if out, err := testenv.GoBuild("-o", filepath.Join(dir, name), pkg).CombinedOutput(); err != nil {
				fmt.Fprintf(os.Stderr, "realnode: go build %s: %v\n%s", pkg, err, out)
				os.Exit(1)
			}
		}
		if err := packWorkload(dir); err != nil {
			fmt.Fprintln(os.Stderr, "realnode:", err)
			os.Exit(1)
		}
		if err := buildPrevious(dir); err != nil {
			fmt.Fprintln(os.Stderr, "realnode:", err)
			os.Exit(1)
		}
		fmt.Printf("realnode: the programs, the workload image and the previous release built in %v\n", time.Since(built).Round(100*time.Millisecond))
		os.Setenv(binEnv, dir)
		code, err := realcluster.RunInNetns()
		if err != nil {
			fmt.Fprintln(os.Stderr, "realnode:", err)
			os.Exit(1)
		}
		os.RemoveAll(dir)
		os.Exit(code)
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	root := testenv.RepoRoot()
	images := filepath.Join(root, "bin", "images")
	layouts, err := realcluster.MadeImages(images)
	if err != nil {
		fmt.Fprintf(os.Stderr, "realnode: %v (make test does)\n", err)
		return 1
	}
	layouts[workloadImage] = filepath.Join(os.Getenv(binEnv), workloadImage)
	maps.Copy(layouts, previousLayouts(os.Getenv(binEnv)))
	start := time.Now()
	rc, err = realcluster.Start(realcluster.Options{Images: layouts, ImageTool: filepath.Join(root, "bin", "image-tool"),
		NodeMonitorGracePeriod: 20 * time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, "realnode:", err)
		return 1
	}
	defer rc.Stop()
	fmt.Printf("realnode: two Ready nodes in %v\n", time.Since(start).Round(100*time.Millisecond))
	start = time.Now()
	// As the README tells users: the bundle as checked in, applied with kubectl.
	if out, err := kubectl("apply", "--server-side", "-f", filepath.Join(root, "dist", "install.yaml")); err != nil {
		fmt.Fprintf(os.Stderr, "realnode: kubectl apply: %v\n%s", err, out)
		return 1
	}
	if out, err := kubectl("-n", operatorNamespace, "rollout", "status", "deployment/"+operatorDeployment, "--timeout=300s"); err != nil {
		fmt.Fprintf(os.Stderr, "realnode: the operator did not become available: %v\n%s\n%s", err, out, clusterState(operatorNamespace))
		return 1
	}
	bundleAvailableIn = time.Since(start)
	fmt.Printf("realnode: the operator available from dist/install.yaml in %v\n", bundleAvailableIn.Round(100*time.Millisecond))
	if ready := os.Getenv(readyEnv); ready != "" {
		// make test starts the other packages now (hack/test.sh).
		if err := os.WriteFile(ready, nil, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "realnode:", err)
		}
	}
	measured("bundle applied → operator Available (both replicas)", "%v", bundleAvailableIn.Round(100*time.Millisecond))
	for _, name := range []string{"fencedlease", "fencedlease-agent"} {
		measureImage(root, name)
	}
	// The specs run side by side are limited by their own count (TestRealNodes), not by
	// -test.parallel, so a spec that only waits does not take a turn.
	if f := flag.Lookup("test.parallel"); f != nil && f.Value.String() == f.DefValue {
		_ = f.Value.Set("16")
	}
	code := m.Run()
	printReport()
	return code
}

// TestRealNodes runs the specs on the one cluster: the bundle's install first, then the
// product on containers — those that keep to their own pods at once, then one at a time
// those that disturb a node or the operator — then the chart, which replaces the bundle.
func TestRealNodes(t *testing.T) {
	t.Run("bundle", func(t *testing.T) {
		// The webhook's certificate is read from its Secret through the API, not waited for
		// from a Secret volume (which took up to 1 min 53 s): a fresh install is Available
		// once both replicas have pulled their image and started.
		if bundleAvailableIn > installBound {
			t.Errorf("the operator was Available %v after kubectl apply, want within %v", bundleAvailableIn.Round(100*time.Millisecond), installBound)
		}
		checkInstall(t, operatorNamespace, "fencedlease")
	})
	t.Run("reached from the machine through a forwarded port", testFromTheMachine)
	// Specs that touch only their own namespace's pods and the servers they start run one
	// at a time, in the order listed; beside them, those that wait on Kubernetes more than
	// they run anything: the CronJob spec (for the next minute), the bad-image and
	// crash-loop specs (for the kubelet's back-offs, and a rollout's hand-off grace). A
	// spec beside starts in its place in the order and lets the next one start at once.
	// Two at a time of the others, beside the other packages of make test, loaded a 2-CPU
	// machine enough that holders on 3–4 s leases missed renewals (docs/notes): the
	// cut-off and the seed timeline, which time a holder on a 4 s lease, come last.
	t.Run("own pods, at once", func(t *testing.T) {
		working, turn := newTurns(1), 0
		for _, s := range []struct {
			name   string
			run    func(*testing.T)
			beside bool
		}{
			{"CronJob with concurrencyPolicy Allow", testCronJobAllow, true},
			{"bad image, Cold", testBadImageCold, true},
			{"crash loop behind a renewing sidecar", testCrashLoopBehindSidecar, true},
			{"README on real nodes", testReadme, false},
			{"bad image, Cold rollout", testBadImageColdRollout, true},
			{"bad image, Warm rollout", testBadImageWarm, false},
			{"PostgreSQL restart under the SQL fence", testPostgresRestart, false},
			{"agent sidecar", testAgentSidecar, false},
			{"warm standby behind a Service", testWarmService, false},
			{"warm hold and downward API", testWarmHold, false},
			{"holder cut off from the API server", testCutOffFromAPIServer, false},
			{"seed timeline", testSeedTimeline, false},
		} {
			// A spec -run leaves out never starts, so it takes no turn: the next is not
			// left waiting for it.
			mine, started := turn, false
			t.Run(s.name, func(t *testing.T) {
				started = true
				t.Parallel()
				working.wait(mine)
				if s.beside {
					working.done()
				} else {
					defer working.done()
				}
				s.run(t)
			})
			if started {
				turn++
			}
		}
	})
	// Then, one at a time, what loads the operator or disturbs a node, the operator or
	// the network for every spec: on a cluster the specs above have left.
	settle(t)
	t.Run("operator memory with 1,000 FencedLeases", testOperatorMemory)
	t.Run("kubelet and containerd restarts on the holder's node", testNodeAgentRestarts)
	t.Run("node lost", testNodeLost)
	t.Run("Warm standby on the lost node", testWarmStandbyOnLostNode)
	t.Run("a Warm holder's machine dies with its standby", testMachineDiesWithItsStandby)
	t.Run("kubectl drain of the holder's node", testDrain)
	t.Run("candidates while the operator is scaled to zero", testCandidatesWithoutTheOperator)
	t.Run("kubectl drain of both operator nodes, one after the other", testDrainBothOperatorNodes)
	t.Run("admission times, policy and webhook", testAdmissionTimes)
	t.Run("upgrade from the previous release, and back", testUpgrade)
	t.Run("chaos", testChaos)
	t.Run("helm chart", testHelmChart)
}

// readyEnv names a file the suite creates once its cluster is up and the bundle
// installed: make test starts the other packages then (hack/test.sh).
const readyEnv = "REALNODE_READY"

// binEnv names the folder of the programs built before the run entered the namespace:
// kubectl-fencedlease and undeploy.
const binEnv = "REALNODE_BIN"

// workloadImage is the suite's own image: test/realnode/workload with fencedlease-agent.
const workloadImage = "realnode-workload"

// packWorkload builds the workload and packs it with the agent of make images into an
// image layout in dir/realnode-workload.
func packWorkload(dir string) error {
	files := filepath.Join(dir, "workload-files")
	if out, err := testenv.GoBuild("-o", filepath.Join(files, "workload"), "./test/realnode/workload").CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./test/realnode/workload: %v\n%s", err, out)
	}
	agent, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "bin", "images", "bin", "linux_"+runtime.GOARCH, "fencedlease-agent"))
	if err != nil {
		return fmt.Errorf("%v: run 'make images' (make test does)", err)
	}
	if err := os.WriteFile(filepath.Join(files, "fencedlease-agent"), agent, 0o755); err != nil {
		return err
	}
	out, err := exec.Command(filepath.Join(testenv.RepoRoot(), "bin", "image-tool"), "pack", "-out", filepath.Join(dir, workloadImage),
		filepath.Join(files, "workload"), filepath.Join(files, "fencedlease-agent")).CombinedOutput()
	if err != nil {
		return fmt.Errorf("image-tool pack: %v\n%s", err, out)
	}
	return nil
}

// program is the path of a program built before the run entered the namespace.
func program(name string) string { return filepath.Join(os.Getenv(binEnv), name) }

const (
	operatorNamespace  = "fencedlease-system"
	operatorDeployment = "fencedlease-controller-manager"
)

// measureImage records an image's size: compressed (what a pull transfers) and unpacked.
func measureImage(root, name string) {
	out, err := exec.Command(filepath.Join(root, "bin", "image-tool"), "describe", "-layout", filepath.Join(root, "bin", "images", name)).Output()
	if err != nil {
		measured("image "+name, "describe: %v", err)
		return
	}
	var descs []struct {
		Platform   string `json:"platform"`
		Compressed int64  `json:"compressedBytes"`
		Files      []struct {
			Size int64 `json:"size"`
		} `json:"files"`
	}
	if err := json.Unmarshal(out, &descs); err != nil {
		measured("image "+name, "describe: %v", err)
		return
	}
	for _, d := range descs {
		var unpacked int64
		for _, f := range d.Files {
			unpacked += f.Size
		}
		measured(fmt.Sprintf("image %s (%s)", name, d.Platform), "%.1f MB compressed, %.1f MB unpacked", float64(d.Compressed)/1e6, float64(unpacked)/1e6)
	}
}

// kubectl runs kubectl as the cluster's admin.
func kubectl(args ...string) (string, error) {
	cmd := exec.Command("kubectl", append([]string{"--kubeconfig", rc.Kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// settle waits until no namespace is being deleted and no pod is terminating: what the
// specs before left is gone before a spec stops a kubelet or replaces the operator.
func settle(t *testing.T) {
	t.Helper()
	start := time.Now()
	ctx := context.Background()
	err := poll(3*time.Minute, func() bool {
		namespaces := &corev1.NamespaceList{}
		pods := &corev1.PodList{}
		if rc.Client.List(ctx, namespaces) != nil || rc.Client.List(ctx, pods) != nil {
			return false
		}
		for _, n := range namespaces.Items {
			if n.DeletionTimestamp != nil {
				return false
			}
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil {
				return false
			}
		}
		return true
	})
	if err != nil {
		t.Fatalf("the cluster did not settle in 3 minutes:\n%s", clusterState("default"))
	}
	t.Logf("the cluster settled in %v", time.Since(start).Round(100*time.Millisecond))
}
