// Command kube is kube-apiserver, kube-scheduler and kube-controller-manager in one
// binary, chosen by the name it is run as (a link named after the command) or by its
// first argument. One binary compiles and links the shared Kubernetes packages once.
// Built with -tags noapiserver it leaves kube-apiserver out (build.sh does, when
// setup-envtest downloaded one): the API server is most of the build time.
package main

import (
	_ "time/tzdata" // CronJob time zones, as the upstream commands

	"github.com/spf13/cobra"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"

	"github.com/fencedlease/fencedlease/hack/envtest/kubernetes/multicall"
)

var commands = map[string]func() *cobra.Command{
	"kube-scheduler":          func() *cobra.Command { return scheduler.NewSchedulerCommand() },
	"kube-controller-manager": func() *cobra.Command { return controllermanager.NewControllerManagerCommand() },
}

func main() { multicall.Run("kube", commands) }
