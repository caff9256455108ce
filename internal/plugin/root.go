// Package plugin is `kubectl fencedlease`: status, history, revoke, suspend and resume of
// FencedLeases, with kubectl's flags (--namespace, --context, --kubeconfig, ...) and
// output conventions (-o json|yaml), and completion of FencedLease names.
package plugin

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// Options is what every subcommand shares.
type Options struct {
	genericiooptions.IOStreams
	Flags *genericclioptions.ConfigFlags
	Clock clock.PassiveClock
}

// NewCommand is the root command; streams are where it reads and writes.
func NewCommand(streams genericiooptions.IOStreams) *cobra.Command {
	o := &Options{IOStreams: streams, Flags: genericclioptions.NewConfigFlags(true), Clock: clock.RealClock{}}
	root := &cobra.Command{
		Use:   "kubectl-fencedlease",
		Short: "Inspect and operate FencedLeases",
		Long: `Inspect and operate FencedLeases: who holds the grant, who waits, what happened,
and an administrator's revoke, suspend and resume.`,
		Annotations: map[string]string{
			// Help and completion show "kubectl fencedlease", as kubectl runs it.
			cobra.CommandDisplayNameAnnotation: "kubectl fencedlease",
		},
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	o.Flags.AddFlags(root.PersistentFlags())
	root.AddCommand(o.statusCommand(), o.historyCommand(), o.revokeCommand(), o.suspendCommand(true), o.suspendCommand(false))
	return root
}

// client connects as kubectl would with the same flags, and names the namespace to use.
func (o *Options) client() (client.Client, string, error) {
	cfg, err := o.Flags.ToRESTConfig()
	if err != nil {
		return nil, "", err
	}
	ns, _, err := o.Flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, "", err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, "", fmt.Errorf("connecting: %w", err)
	}
	return c, ns, nil
}

var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(fencingv1.AddToScheme(s))
	return s
}()

// runE is a subcommand's RunE on one FencedLease: it checks -o, connects, and calls do
// with the namespace and the name.
func (o *Options) runE(out *output, do func(cmd *cobra.Command, c client.Client, ns, name string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := out.validate(); err != nil {
			return err
		}
		c, ns, err := o.client()
		if err != nil {
			return err
		}
		return do(cmd, c, ns, args[0])
	}
}

// completeNames offers the FencedLeases of the namespace for the first argument.
func (o *Options) completeNames(cmd *cobra.Command, args []string, prefix string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	c, ns, err := o.client()
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	var list fencingv1.FencedLeaseList
	if err := c.List(cmd.Context(), &list, client.InNamespace(ns)); err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	var out []string
	for _, fl := range list.Items {
		if strings.HasPrefix(fl.Name, prefix) {
			out = append(out, fl.Name)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}
