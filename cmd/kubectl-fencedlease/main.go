// Command kubectl-fencedlease is the kubectl plugin: `kubectl fencedlease status|history|
// revoke|suspend|resume NAME`. Put it on PATH (or install it with krew); for completion,
// also kubectl_complete-fencedlease (next to this file).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/fencedlease/fencedlease/internal/plugin"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	cmd := plugin.NewCommand(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
	if err := cmd.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		stop()
		os.Exit(1)
	}
}
