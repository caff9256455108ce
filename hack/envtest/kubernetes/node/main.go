// Command kube-node is the kubelet and kube-proxy in one binary, chosen by the name it is run
// as (a link named after the command) or by its first argument: what a real node of
// test/realnode runs. It is in the module of kube, so it reuses the Kubernetes packages that
// kube's build compiled.
package main

import (
	"context"

	"github.com/spf13/cobra"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	proxy "k8s.io/kubernetes/cmd/kube-proxy/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"

	"github.com/fencedlease/fencedlease/hack/envtest/kubernetes/multicall"
)

var commands = map[string]func() *cobra.Command{
	"kubelet":    func() *cobra.Command { return kubelet.NewKubeletCommand(context.Background()) },
	"kube-proxy": func() *cobra.Command { return proxy.NewProxyCommand() },
}

func main() { multicall.Run("kube-node", commands) }
