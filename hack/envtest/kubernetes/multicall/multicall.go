// Package multicall runs one of several commands linked into one binary, chosen by the
// name the binary is run as (a link named after the command) or by its first argument:
// kube (the control plane) and kube-node (what a node runs) share it.
package multicall

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
)

// Run runs the command os.Args names and exits with its status.
func Run(binary string, commands map[string]func() *cobra.Command) {
	name := filepath.Base(os.Args[0])
	if _, ok := commands[name]; !ok && len(os.Args) > 1 {
		name = os.Args[1]
		os.Args = append([]string{name}, os.Args[2:]...)
	}
	newCommand, ok := commands[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "%s: run as, or with first argument, one of: %s (got %q)\n", binary,
			strings.Join(slices.Sorted(maps.Keys(commands)), ", "), strings.Join(os.Args, " "))
		os.Exit(2)
	}
	cmd := newCommand()
	cmd.SetArgs(os.Args[1:])
	os.Exit(cli.Run(cmd))
}
