// Command kube-node is the kubelet and kube-proxy in one binary, chosen by the name it is run
// as (a link named after the command) or by its first argument: what a real node of
// test/realnode runs. It is in the module of kube, so it reuses the Kubernetes packages that
// kube's build compiled.
package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	proxy "k8s.io/kubernetes/cmd/kube-proxy/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

var commands = map[string]func() *cobra.Command{
	"kubelet":    func() *cobra.Command { return kubelet.NewKubeletCommand(context.Background()) },
	"kube-proxy": func() *cobra.Command { return proxy.NewProxyCommand() },
}

func main() {
	name := filepath.Base(os.Args[0])
	if _, ok := commands[name]; !ok && len(os.Args) > 1 {
		name = os.Args[1]
		os.Args = append([]string{name}, os.Args[2:]...)
	}
	newCommand, ok := commands[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "kube-node: run as, or with first argument, one of: %s (got %q)\n", strings.Join(slices.Sorted(maps.Keys(commands)), ", "), strings.Join(os.Args, " "))
		os.Exit(2)
	}
	cmd := newCommand()
	cmd.SetArgs(os.Args[1:])
	os.Exit(cli.Run(cmd))
}
