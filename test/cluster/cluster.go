// Package cluster runs a small real cluster for tests: etcd and kube-apiserver (envtest),
// kube-scheduler, kube-controller-manager with the controllers workloads need, and kwok
// playing the nodes' kubelets. Everything listens on loopback or nowhere, so suites may
// run side by side. Built by `make envtest` into bin/k8s/<version>.
package cluster

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/fencedlease/fencedlease/test/testenv"
)

//go:embed stages.yaml
var stages []byte

// KwokNodeAnnotation marks the nodes kwok manages.
const KwokNodeAnnotation = "kwok.x-k8s.io/node"

// Pod annotations the stages read, each a Go duration: how long after it is bound a pod
// starts running (a slow image pull), and how long after it runs a Job's pod succeeds
// (its work; default 1s).
const (
	StartAfterAnnotation    = "test.fencedlease.io/start-after"
	CompleteAfterAnnotation = "test.fencedlease.io/complete-after"
	// WaitingReasonAnnotation makes a bound pod's containers wait for good with this
	// reason (ImagePullBackOff, CrashLoopBackOff, ...) instead of running.
	WaitingReasonAnnotation = "test.fencedlease.io/waiting-reason"
)

// Controllers are the controller-manager's controllers a workload needs.
var Controllers = []string{
	"job-controller", "cronjob-controller", "deployment-controller", "replicaset-controller",
	"statefulset-controller", "garbage-collector-controller", "node-lifecycle-controller",
	"taint-eviction-controller", "namespace-controller", "pod-garbage-collector-controller",
	"serviceaccount-controller", "disruption-controller", "endpointslice-controller",
}

// Options shape a cluster.
type Options struct {
	// Env is the control plane to start (CRDs, webhooks); testenv.New() when nil.
	Env *envtest.Environment
	// Nodes is how many kwok nodes to create, named node-0, node-1, ...; default 2.
	Nodes int
	// NodeMonitorGracePeriod is how long a node may go without a heartbeat before the
	// node lifecycle controller marks it NotReady; default 40s as upstream.
	NodeMonitorGracePeriod time.Duration
}

// Cluster is a running cluster.
type Cluster struct {
	Env    *envtest.Environment
	Config *rest.Config
	Client client.Client
	Nodes  []string
	dir    string
	procs  []*exec.Cmd
	// kubelets is the kwok process playing each node's kubelet; kwok starts one.
	kubelets map[string]*exec.Cmd
	kwok     func(node string) (*exec.Cmd, error)
	// keepLogs keeps the components' logs after Stop, for a cluster that failed to start.
	keepLogs bool
}

// Start starts the control plane, the scheduler, the controller-manager and kwok, creates
// the nodes and returns when they are Ready. On error, what started is stopped.
func Start(o Options) (c *Cluster, err error) {
	if o.Env == nil {
		if o.Env, err = testenv.New(); err != nil {
			return nil, err
		}
	}
	if o.Nodes == 0 {
		o.Nodes = 2
	}
	if o.NodeMonitorGracePeriod == 0 {
		o.NodeMonitorGracePeriod = 40 * time.Second
	}
	assets := o.Env.BinaryAssetsDirectory
	for _, bin := range []string{"kube-scheduler", "kube-controller-manager", "kwok"} {
		if _, err := os.Stat(filepath.Join(assets, bin)); err != nil {
			return nil, fmt.Errorf("%s is missing from %s: run 'make envtest'", bin, assets)
		}
	}
	c = &Cluster{Env: o.Env}
	if c.dir, err = os.MkdirTemp("", "fencedlease-cluster-"); err != nil {
		return nil, err
	}
	if c.Config, err = o.Env.Start(); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			c.keepLogs = true
			_ = c.Stop()
		}
	}()
	if c.Client, err = client.New(c.Config, client.Options{Scheme: testenv.Scheme()}); err != nil {
		return nil, err
	}
	kubeconfig, err := c.adminKubeconfig()
	if err != nil {
		return nil, err
	}
	stagesFile := filepath.Join(c.dir, "kwok-stages.yaml")
	if err := os.WriteFile(stagesFile, stages, 0o600); err != nil {
		return nil, err
	}
	if _, err := c.run(assets, "kube-scheduler", "kube-scheduler", "--kubeconfig="+kubeconfig, "--leader-elect=false", "--secure-port=0"); err != nil {
		return nil, err
	}
	if _, err := c.run(assets, "kube-controller-manager", "kube-controller-manager", "--kubeconfig="+kubeconfig, "--leader-elect=false", "--secure-port=0",
		"--controllers="+strings.Join(Controllers, ","), "--node-monitor-period=1s",
		"--node-monitor-grace-period="+o.NodeMonitorGracePeriod.String(), "--concurrent-gc-syncs=2"); err != nil {
		return nil, err
	}
	// kwok renews a node's Lease every quarter of its duration: a fifth of the grace
	// period, so that a loaded machine's late renewal never makes a live node NotReady (the
	// node lifecycle controller then marks its pods NotReady for good, and a StatefulSet
	// waits forever for them). At 40 s, as the kubelet's default, a 10 s grace period was
	// one renewal interval, with no margin.
	nodeLease := strconv.Itoa(max(1, int((4 * o.NodeMonitorGracePeriod / 5).Seconds())))
	c.kwok = func(node string) (*exec.Cmd, error) {
		return c.run(assets, "kwok-"+node, "kwok", "--kubeconfig="+kubeconfig, "--config="+stagesFile,
			"--manage-single-node="+node, "--node-lease-duration-seconds="+nodeLease, "--server-address=", "--node-port=0")
	}
	c.kubelets = map[string]*exec.Cmd{}
	for i := range o.Nodes {
		name := fmt.Sprintf("node-%d", i)
		if err := c.Client.Create(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name: name, Annotations: map[string]string{KwokNodeAnnotation: "fake"},
			Labels: map[string]string{"kubernetes.io/hostname": name, "type": "kwok"},
		}, Spec: corev1.NodeSpec{PodCIDR: fmt.Sprintf("10.244.%d.0/24", i)}}); err != nil { // kwok takes pod IPs from it
			return nil, err
		}
		c.Nodes = append(c.Nodes, name)
		if c.kubelets[name], err = c.kwok(name); err != nil {
			return nil, err
		}
	}
	return c, c.waitForNodes()
}

// waitForNodes waits until every node is Ready and carries no taint (the node lifecycle
// controller lifts not-ready when it sees the kubelet, here kwok, report Ready).
func (c *Cluster) waitForNodes() error {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var last string
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		for _, name := range c.Nodes {
			n := &corev1.Node{}
			if err := c.Client.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
				return false, err
			}
			if !nodeReady(n) || len(n.Spec.Taints) > 0 {
				last = fmt.Sprintf("node %s: conditions %v, taints %v", name, n.Status.Conditions, n.Spec.Taints)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("nodes not ready: %w (%s; logs in %s)", err, last, c.dir)
	}
	return nil
}

func nodeReady(n *corev1.Node) bool {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// adminKubeconfig writes a cluster-admin kubeconfig for the components.
func (c *Cluster) adminKubeconfig() (string, error) {
	user, err := c.Env.AddUser(envtest.User{Name: "cluster-components", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return "", err
	}
	raw, err := user.KubeConfig()
	if err != nil {
		return "", err
	}
	path := filepath.Join(c.dir, "kubeconfig")
	return path, os.WriteFile(path, raw, 0o600)
}

// run starts binary as a component called name, logging to a file of its own in the
// cluster's folder (appended to, so a restarted component keeps its history).
func (c *Cluster) run(assets, name, binary string, args ...string) (*exec.Cmd, error) {
	log, err := os.OpenFile(filepath.Join(c.dir, name+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(filepath.Join(assets, binary), args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	c.procs = append(c.procs, cmd)
	return cmd, nil
}

// StopNode makes node fail as a dead machine does: the kwok process that is its kubelet
// is killed, so the node's Lease is no longer renewed, the node lifecycle controller marks
// it NotReady after the grace period, and nothing confirms that its pods' containers
// stopped. The returned function starts its kubelet again and waits for the node.
func (c *Cluster) StopNode(name string) (restart func() error, err error) {
	kubelet := c.kubelets[name]
	if kubelet == nil {
		return nil, fmt.Errorf("no node %s", name)
	}
	_ = syscall.Kill(-kubelet.Process.Pid, syscall.SIGKILL)
	_ = kubelet.Wait()
	c.kubelets[name] = nil
	return func() error {
		var err error
		if c.kubelets[name], err = c.kwok(name); err != nil {
			return err
		}
		return c.waitForNodes()
	}, nil
}

// Logs is the folder holding each component's log.
func (c *Cluster) Logs() string { return c.dir }

// Stop stops the components, then the control plane. Component logs stay in Logs() when
// the cluster failed to start or to stop; otherwise the folder is removed.
func (c *Cluster) Stop() error {
	var errs []error
	for i := len(c.procs) - 1; i >= 0; i-- {
		p := c.procs[i]
		if p.ProcessState != nil {
			continue // stopped already (a node StopNode killed)
		}
		_ = syscall.Kill(-p.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-p.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}
	c.procs = nil
	if c.Config != nil {
		if err := c.Env.Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 && !c.keepLogs && os.Getenv("FENCEDLEASE_KEEP_CLUSTER_LOGS") == "" {
		_ = os.RemoveAll(c.dir)
	}
	return errors.Join(errs...)
}
