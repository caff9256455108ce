package realcluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

type nodeSpec struct {
	name, ip, podCIDR, gateway, bridge string
	// port is the kubelet's; port+1 its healthz.
	port int
}

// nodeSpecs are the two nodes: each its address on the namespace's dummy interface, its
// pod range on a bridge of its own, its ports.
var nodeSpecs = []nodeSpec{
	{name: "node-a", ip: "198.18.0.11", podCIDR: "198.18.16.0/24", gateway: "198.18.16.1", bridge: "flbr-a", port: 10250},
	{name: "node-b", ip: "198.18.0.12", podCIDR: "198.18.17.0/24", gateway: "198.18.17.1", bridge: "flbr-b", port: 10260},
}

// node is one running node: its containerd and kubelet.
type node struct {
	spec       nodeSpec
	dir        string
	containerd *exec.Cmd
	kubelet    *exec.Cmd
}

func (n *node) socket() string     { return filepath.Join(n.dir, "containerd.sock") }
func (n *node) cgroupRoot() string { return "/fencedlease-" + n.spec.name }

// prepare writes the node's containerd, CNI and kubelet configuration and makes its
// cgroupRoot in every hierarchy (the kubelet wants it to exist).
func (c *Cluster) prepare(n *node) error {
	for _, d := range []string{"cni", "certs.d/" + c.registry, "certs.d/docker.io", "kubelet", "pod-logs", "kubelet-certs", "volume-plugins"} {
		if err := os.MkdirAll(filepath.Join(n.dir, d), 0o755); err != nil {
			return err
		}
	}
	for _, h := range cgroupHierarchies() {
		dir := filepath.Join(h, n.cgroupRoot())
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if filepath.Base(h) == "cpuset" {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				v, err := os.ReadFile(filepath.Join(h, f))
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
					return err
				}
			}
		}
	}
	files := map[string]string{
		"containerd.toml":                       containerdConfig(n, c.assets, c.registry),
		"certs.d/" + c.registry + "/hosts.toml": registryHosts(c.registry),
		"certs.d/docker.io/hosts.toml":          dockerHubMirror(c.registry),
		"cni/10-fencedlease.conflist":           cniConfig(n),
		"kubelet.yaml":                          kubeletConfig(n),
		"resolv.conf":                           "nameserver " + ServerIP + "\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(n.dir, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	user, err := c.Env.AddUser(envtest.User{Name: "system:node:" + n.spec.name, Groups: []string{"system:nodes"}}, nil)
	if err != nil {
		return err
	}
	raw, err := user.KubeConfig()
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(n.dir, "kubeconfig"), raw, 0o600)
}

// startContainerd starts the node's containerd and waits for its socket.
func (c *Cluster) startContainerd(n *node) error {
	cmd, err := c.run("containerd-"+n.spec.name, filepath.Join(c.assets, "containerd"), "--config", filepath.Join(n.dir, "containerd.toml"))
	if err != nil {
		return err
	}
	n.containerd = cmd
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		if conn, err := net.Dial("unix", n.socket()); err == nil {
			conn.Close()
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("containerd of %s did not listen on %s (log %s)", n.spec.name, n.socket(), c.LogOf("containerd-"+n.spec.name))
}

// startKubelet starts the node's kubelet.
func (c *Cluster) startKubelet(n *node) error {
	cmd, err := c.run("kubelet-"+n.spec.name, filepath.Join(c.assets, "kubelet"),
		"--config="+filepath.Join(n.dir, "kubelet.yaml"),
		"--kubeconfig="+filepath.Join(n.dir, "kubeconfig"),
		"--root-dir="+filepath.Join(n.dir, "kubelet"),
		"--cert-dir="+filepath.Join(n.dir, "kubelet-certs"),
		"--node-ip="+n.spec.ip, "--hostname-override="+n.spec.name, "--v=2")
	n.kubelet = cmd
	return err
}

func containerdConfig(n *node, assets, registry string) string {
	return fmt.Sprintf(`version = 3
root = %[1]q
state = %[2]q

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[plugins."io.containerd.nri.v1.nri"]
  disable = true

[plugins."io.containerd.cri.v1.images"]
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = %[5]q
  [plugins."io.containerd.cri.v1.images".registry]
    config_path = %[6]q

[plugins."io.containerd.cri.v1.runtime"]
  enable_selinux = false
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = [%[7]q]
    conf_dir = %[8]q
  [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
      BinaryName = "runc"
      Root = %[9]q
      SystemdCgroup = false
`, filepath.Join(n.dir, "containerd-root"), filepath.Join(n.dir, "containerd-state"), n.socket(), n.socket()+".ttrpc",
		registry+"/pause:dev", filepath.Join(n.dir, "certs.d"), filepath.Join(assets, "cni"), filepath.Join(n.dir, "cni"),
		filepath.Join(n.dir, "runc"))
}

// registryHosts lets containerd pull from the tests' registry over plain HTTP.
func registryHosts(registry string) string {
	return fmt.Sprintf("server = \"http://%[1]s\"\n\n[host.\"http://%[1]s\"]\n  capabilities = [\"pull\", \"resolve\"]\n", registry)
}

// cniConfig: a bridge of the node's own with its pod range; the default route lets pods
// reach the other node's pods and the servers' address through the namespace.
// dockerHubMirror makes the registry the nodes' only source of docker.io's images, as a
// cluster with a pull-through mirror has it: dist/install.yaml's fencedlease:dev and
// fencedlease-agent:dev are pulled from it unchanged, and nothing is asked of docker.io.
func dockerHubMirror(registry string) string {
	return fmt.Sprintf("server = \"http://%[1]s\"\n\n[host.\"http://%[1]s\"]\n  capabilities = [\"pull\", \"resolve\"]\n", registry)
}

func cniConfig(n *node) string {
	return fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "fencedlease-%[1]s",
  "plugins": [
    {
      "type": "bridge", "bridge": %[2]q, "isGateway": true, "ipMasq": false, "hairpinMode": true,
      "ipam": {
        "type": "host-local", "dataDir": %[3]q,
        "ranges": [[{"subnet": %[4]q, "gateway": %[5]q}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, n.spec.name, n.spec.bridge, filepath.Join(n.dir, "ipam"), n.spec.podCIDR, n.spec.gateway)
}

// kubeletConfig: the settings this machine kind needs (docs/operations.md), the node's own
// ports and folders; anonymous, always-allowed kubelet API (only the namespace reaches it).
// Pods are synced every 10 s instead of every minute: a Secret's new content reaches its
// volume, and a pod whose pull failed is reported in ImagePullBackOff, on the next sync,
// and the suite should not wait a minute for either.
func kubeletConfig(n *node) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %[1]s
port: %[2]d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %[3]d
containerRuntimeEndpoint: unix://%[4]s
cgroupDriver: cgroupfs
cgroupRoot: %[5]s
failCgroupV1: false
failSwapOn: false
makeIPTablesUtilChains: false
podLogsDir: %[6]s
volumePluginDir: %[7]s
resolvConf: %[8]s
clusterDomain: cluster.local
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
serializeImagePulls: false
syncFrequency: 10s
evictionHard:
  memory.available: 100Mi
  nodefs.available: "1%%"
  imagefs.available: "1%%"
  nodefs.inodesFree: "1%%"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
enableServer: true
`, n.spec.ip, n.spec.port, n.spec.port+1, n.socket(), n.cgroupRoot(), filepath.Join(n.dir, "pod-logs"),
		filepath.Join(n.dir, "volume-plugins"), filepath.Join(n.dir, "resolv.conf"))
}
