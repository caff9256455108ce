// Package realcluster runs a real two-node Kubernetes cluster on this machine, for tests
// and for `make cluster`: etcd and kube-apiserver (envtest), kube-scheduler,
// kube-controller-manager, a registry serving `make images`' output, kube-proxy, and two
// nodes, each a kubelet with its own containerd, runc (Debian's) and CNI bridge. All of it
// runs in a network namespace of its own (netns.go), as root. Built by `make nodes`.
package realcluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/fencedlease/fencedlease/test/cluster"
	"github.com/fencedlease/fencedlease/test/testenv"
)

// RegistryPort is where the registry listens, on ServerIP.
const RegistryPort = 5000

// Options shape a cluster.
type Options struct {
	// Images maps a repository name (fencedlease, fencedlease-agent, pause) to the OCI
	// layout the registry serves as NAME:dev; pause is required (the sandbox image).
	Images map[string]string
	// ImageTool is `make images`' tool (bin/image-tool), which serves the registry.
	ImageTool string
	// NodeMonitorGracePeriod is how long a silent node stays Ready; default 40s.
	NodeMonitorGracePeriod time.Duration
}

// Cluster is a running real cluster.
type Cluster struct {
	Env    *envtest.Environment
	Config *rest.Config
	Client client.WithWatch
	// Nodes are the nodes' names.
	Nodes []string
	// Kubeconfig is a cluster-admin kubeconfig's path.
	Kubeconfig string
	// HostKubeconfig is the same kubeconfig for the machine outside the namespace: its
	// server is the loopback port RunInNetns forwards to the API server; "" when the
	// cluster was not started through RunInNetns.
	HostKubeconfig string
	dir            string
	assets         string
	registry       string
	nodes          map[string]*node
	procs          []*exec.Cmd
	// exited is closed when a component's process has ended.
	exited map[*exec.Cmd]chan struct{}
}

// Registry is the registry's host:port, the prefix of every image the pods pull.
func (c *Cluster) Registry() string { return c.registry }

// Dir is the run's folder: each component's log is NAME.log there.
func (c *Cluster) Dir() string { return c.dir }

// LogOf is the path of a component's log (kubelet-node-a, containerd-node-b, ...).
func (c *Cluster) LogOf(name string) string { return filepath.Join(c.dir, "logs", name+".log") }

// Start starts the cluster and returns when both nodes are Ready. Call it inside the
// namespace (RunInNetns). On error, what started is stopped.
func Start(o Options) (c *Cluster, err error) {
	if !InNetns() {
		return nil, errors.New("realcluster.Start runs inside the cluster's network namespace: call RunInNetns first")
	}
	if o.NodeMonitorGracePeriod == 0 {
		o.NodeMonitorGracePeriod = 40 * time.Second
	}
	if _, ok := o.Images["pause"]; !ok {
		return nil, errors.New("no pause image: the nodes' sandbox image is built here too")
	}
	env, err := testenv.New()
	if err != nil {
		return nil, err
	}
	c = &Cluster{Env: env, dir: StateDir(), assets: env.BinaryAssetsDirectory, nodes: map[string]*node{}, exited: map[*exec.Cmd]chan struct{}{},
		registry: fmt.Sprintf("%s:%d", ServerIP, RegistryPort)}
	for _, bin := range []string{"kube-scheduler", "kube-controller-manager", "kubelet", "kube-proxy", "containerd", "containerd-shim-runc-v2", "ctr", "cni/bridge"} {
		if _, err := os.Stat(filepath.Join(c.assets, bin)); err != nil {
			return nil, fmt.Errorf("%s is missing from %s: run 'make nodes'", bin, c.assets)
		}
	}
	if _, err := exec.LookPath("runc"); err != nil {
		return nil, errors.New("runc is not installed (apt-get install runc; .ci/run does)")
	}
	if err := os.MkdirAll(filepath.Join(c.dir, "logs"), 0o755); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("%w (logs in %s)", err, filepath.Join(c.dir, "logs"))
			c.Stop()
		}
	}()
	if err := c.startRegistry(o); err != nil {
		return nil, err
	}
	api := env.ControlPlane.GetAPIServer()
	// Both, or envtest picks a loopback port; the namespace is the run's own, so 6443 is free.
	api.SecureServing.ListenAddr.Address, api.SecureServing.ListenAddr.Port = ServerIP, "6443"
	api.CertDir = filepath.Join(c.dir, "apiserver-certs")
	if err := os.MkdirAll(api.CertDir, 0o700); err != nil {
		return nil, err
	}
	if api.SecureServing.CA, err = writeAPIServerCerts(api.CertDir); err != nil {
		return nil, err
	}
	args := api.Configure()
	args.Set("advertise-address", ServerIP)
	args.Set("authorization-mode", "Node", "RBAC")
	args.Set("enable-admission-plugins", "NodeRestriction")
	args.Set("disable-admission-plugins", "")
	args.Set("service-cluster-ip-range", ServiceCIDR)
	args.Set("kubelet-preferred-address-types", "InternalIP", "Hostname")
	args.Set("allow-privileged", "true")
	if c.Config, err = env.Start(); err != nil {
		return nil, err
	}
	if c.Client, err = client.NewWithWatch(c.Config, client.Options{Scheme: testenv.Scheme()}); err != nil {
		return nil, err
	}
	if c.Kubeconfig, err = c.writeKubeconfig("admin", envtest.User{Name: "cluster-admin", Groups: []string{"system:masters"}}); err != nil {
		return nil, err
	}
	if c.HostKubeconfig, err = c.writeHostKubeconfig(); err != nil {
		return nil, err
	}
	if err := c.startControllers(o); err != nil {
		return nil, err
	}
	for _, spec := range nodeSpecs {
		n := &node{spec: spec, dir: filepath.Join(c.dir, spec.name)}
		c.nodes[spec.name] = n
		c.Nodes = append(c.Nodes, spec.name)
		if err := c.prepare(n); err != nil {
			return nil, err
		}
		if err := c.startContainerd(n); err != nil {
			return nil, err
		}
		if err := c.startKubelet(n); err != nil {
			return nil, err
		}
	}
	return c, c.WaitForNodes(2 * time.Minute)
}

// startControllers starts the scheduler, the controller-manager (with the CA and the
// service account key, so pods get tokens and kube-root-ca.crt) and kube-proxy.
func (c *Cluster) startControllers(o Options) error {
	api := c.Env.ControlPlane.GetAPIServer()
	ca := filepath.Join(c.dir, "ca.crt")
	if err := os.WriteFile(ca, c.Config.CAData, 0o644); err != nil {
		return err
	}
	if _, err := c.run("kube-scheduler", filepath.Join(c.assets, "kube-scheduler"), "--kubeconfig="+c.Kubeconfig,
		"--leader-elect=false", "--secure-port=0"); err != nil {
		return err
	}
	controllers := append(append([]string{}, cluster.Controllers...), "root-ca-certificate-publisher-controller")
	if _, err := c.run("kube-controller-manager", filepath.Join(c.assets, "kube-controller-manager"), "--kubeconfig="+c.Kubeconfig,
		"--leader-elect=false", "--secure-port=0", "--controllers="+strings.Join(controllers, ","),
		"--root-ca-file="+ca, "--service-account-private-key-file="+filepath.Join(api.CertDir, "sa-signer.key"),
		"--node-monitor-period=1s", "--node-monitor-grace-period="+o.NodeMonitorGracePeriod.String(),
		"--concurrent-gc-syncs=2"); err != nil {
		return err
	}
	proxy, err := c.writeKubeconfig("kube-proxy", envtest.User{Name: "system:kube-proxy"})
	if err != nil {
		return err
	}
	// One kube-proxy: both nodes share the namespace, so one set of rules serves them.
	_, err = c.run("kube-proxy", filepath.Join(c.assets, "kube-proxy"), "--kubeconfig="+proxy,
		"--proxy-mode=nftables", "--hostname-override="+nodeSpecs[0].name, "--cluster-cidr="+PodCIDR,
		"--masquerade-all", "--conntrack-max-per-core=0", "--metrics-bind-address=127.0.0.1:10249",
		"--healthz-bind-address=127.0.0.1:10256")
	return err
}

// startRegistry serves the images on ServerIP:RegistryPort and waits until they are in.
func (c *Cluster) startRegistry(o Options) error {
	args := []string{"serve", "-addr", c.registry}
	for name, layout := range o.Images {
		// library/NAME too: the nodes pull docker.io's images from here (dockerHubMirror).
		args = append(args, name+"="+layout, "library/"+name+"="+layout)
	}
	cmd := exec.Command(o.ImageTool, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	log, err := os.Create(c.LogOf("registry"))
	if err != nil {
		return err
	}
	cmd.Stderr = log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	c.procs = append(c.procs, cmd)
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		fmt.Fprintln(log, sc.Text())
		if strings.HasPrefix(sc.Text(), "ready ") {
			go func() { _, _ = bufio.NewReader(out).WriteTo(log) }()
			return nil
		}
	}
	return fmt.Errorf("the registry did not start (log %s)", c.LogOf("registry"))
}

// writeKubeconfig writes a kubeconfig for user under the run's folder.
func (c *Cluster) writeKubeconfig(name string, user envtest.User) (string, error) {
	u, err := c.Env.AddUser(user, nil)
	if err != nil {
		return "", err
	}
	raw, err := u.KubeConfig()
	if err != nil {
		return "", err
	}
	path := filepath.Join(c.dir, name+".kubeconfig")
	return path, os.WriteFile(path, raw, 0o600)
}

// WaitForNodes waits until every node is Ready without taints.
func (c *Cluster) WaitForNodes(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last string
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		for _, name := range c.Nodes {
			n := &corev1.Node{}
			if err := c.Client.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
				last = err.Error()
				return false, nil
			}
			ready := false
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeReady {
					ready = cond.Status == corev1.ConditionTrue
					last = fmt.Sprintf("node %s: %s %s", name, cond.Reason, cond.Message)
				}
			}
			if !ready || len(n.Spec.Taints) > 0 {
				if ready {
					last = fmt.Sprintf("node %s: taints %v", name, n.Spec.Taints)
				}
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("nodes not ready: %w (%s)", err, last)
	}
	return nil
}

// run starts a component, its output appended to its log, in a process group of its own.
func (c *Cluster) run(name, binary string, args ...string) (*exec.Cmd, error) {
	log, err := os.OpenFile(c.LogOf(name), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), "PATH="+c.assets+":/usr/local/sbin:/usr/sbin:/sbin:"+os.Getenv("PATH"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	done := make(chan struct{})
	c.exited[cmd] = done
	go func() { _ = cmd.Wait(); log.Close(); close(done) }()
	c.procs = append(c.procs, cmd)
	return cmd, nil
}

// Stop stops every component and the control plane. The run's processes, mounts and
// cgroups are removed by RunInNetns's Cleanup when this process ends.
func (c *Cluster) Stop() {
	for _, n := range c.nodes {
		for _, p := range []*exec.Cmd{n.kubelet, n.containerd} {
			if p != nil && p.Process != nil {
				_ = syscall.Kill(-p.Process.Pid, syscall.SIGKILL)
			}
		}
	}
	for i := len(c.procs) - 1; i >= 0; i-- {
		if p := c.procs[i]; p.Process != nil {
			_ = syscall.Kill(-p.Process.Pid, syscall.SIGTERM)
		}
	}
	if c.Config != nil {
		_ = c.Env.Stop()
	}
}
