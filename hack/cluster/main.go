// Command cluster is make cluster: a real two-node cluster on this machine (internal/realcluster)
// with the images of make images in its registry, until Ctrl-C. It prints how to reach it.
// As root only. make cluster-down removes what a killed run left.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/fencedlease/fencedlease/internal/realcluster"
)

func main() {
	images := flag.String("images", "bin/images", "make images' output: one OCI layout per image")
	tool := flag.String("image-tool", "bin/image-tool", "make images' tool, which serves the registry")
	down := flag.Bool("down", false, "remove what an earlier run left (processes, mounts, cgroups, the namespace) and exit")
	kubeconfig := flag.String("write-kubeconfig", "bin/cluster.kubeconfig", "where to write the kubeconfig that reaches the cluster from this machine (a loopback port forwarded into it)")
	flag.Parse()
	if *down {
		if err := realcluster.Cleanup(); err != nil {
			fail(err)
		}
		fmt.Println("cluster: nothing left")
		return
	}
	if !realcluster.InNetns() {
		code, err := realcluster.RunInNetns()
		if err != nil {
			fail(err)
		}
		os.Exit(code)
	}
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		// make exports it; run by hand from the repository, take what make nodes built.
		if dirs, _ := filepath.Glob("bin/k8s/*"); len(dirs) > 0 {
			abs, _ := filepath.Abs(dirs[len(dirs)-1])
			os.Setenv("KUBEBUILDER_ASSETS", abs)
		}
	}
	layouts, err := realcluster.MadeImages(*images)
	if err != nil {
		fail(err)
	}
	toolPath, err := filepath.Abs(*tool)
	if err != nil {
		fail(err)
	}
	start := time.Now()
	c, err := realcluster.Start(realcluster.Options{Images: layouts, ImageTool: toolPath})
	if err != nil {
		fail(err)
	}
	hostConfig, err := filepath.Abs(*kubeconfig)
	if err != nil {
		fail(err)
	}
	raw, err := os.ReadFile(c.HostKubeconfig)
	if err == nil {
		err = os.WriteFile(hostConfig, raw, 0o600)
	}
	if err == nil {
		err = toSudoUser(hostConfig)
	}
	if err != nil {
		c.Stop()
		fail(fmt.Errorf("writing %s: %w", *kubeconfig, err))
	}
	defer os.Remove(hostConfig)
	fmt.Printf(`cluster: two Ready nodes (%s) in %s
  kubeconfig:  %s (its server: a port on 127.0.0.1 forwarded into the cluster)
  use it:      export KUBECONFIG=%s; kubectl get nodes -o wide
  images:      %s/fencedlease:dev, %s/fencedlease-agent:dev (make images' output); docker.io's busybox:1.36
               is a stand-in built here, for config/samples
  nodes:       kubelet, containerd logs in %s; ctr: nsenter --net=/run/netns/%s %s/ctr --address %s/node-a/containerd.sock -n k8s.io tasks ls
Ctrl-C (or SIGTERM to this process) stops it and removes all it made.
`, c.Nodes, time.Since(start).Round(100*time.Millisecond), *kubeconfig, hostConfig,
		c.Registry(), c.Registry(), filepath.Join(c.Dir(), "logs"), realcluster.Netns, c.Env.BinaryAssetsDirectory, c.Dir())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	c.Stop()
}

// toSudoUser gives path to the user who ran sudo make cluster, so their kubectl reads it
// without sudo; as root itself, it stays root's.
func toSudoUser(path string) error {
	uid, errU := strconv.Atoi(os.Getenv("SUDO_UID"))
	gid, errG := strconv.Atoi(os.Getenv("SUDO_GID"))
	if errU != nil || errG != nil {
		return nil
	}
	return os.Chown(path, uid, gid)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "cluster:", err)
	os.Exit(1)
}
