// Command kube is kube-apiserver, kube-scheduler and kube-controller-manager in one
// binary, chosen by the name it is run as (a link named after the command) or by its
// first argument. One binary compiles and links the shared Kubernetes packages once.
// Built with -tags noapiserver it leaves kube-apiserver out (build.sh does, when
// setup-envtest downloaded one): the API server is most of the build time.
package main

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	_ "time/tzdata" // CronJob time zones, as the upstream commands

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

var commands = map[string]func() *cobra.Command{
	"kube-scheduler":          func() *cobra.Command { return scheduler.NewSchedulerCommand() },
	"kube-controller-manager": func() *cobra.Command { return controllermanager.NewControllerManagerCommand() },
}

func main() {
	name := filepath.Base(os.Args[0])
	if _, ok := commands[name]; !ok && len(os.Args) > 1 {
		name = os.Args[1]
		os.Args = append([]string{name}, os.Args[2:]...)
	}
	newCommand, ok := commands[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "kube: run as, or with first argument, one of: %s (got %q)\n", strings.Join(slices.Sorted(maps.Keys(commands)), ", "), strings.Join(os.Args, " "))
		os.Exit(2)
	}
	cmd := newCommand()
	cmd.SetArgs(os.Args[1:])
	os.Exit(cli.Run(cmd))
}
