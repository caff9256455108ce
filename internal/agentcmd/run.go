package agentcmd

import (
	"fmt"
	"os"
	"path/filepath"
)

// Run serves `agent` and `hold` when args[0] names one, and reports whether it did; the
// process should then exit with code.
func Run(args []string) (code int, ran bool) {
	if len(args) == 0 {
		return 0, false
	}
	prog := filepath.Base(os.Args[0])
	switch args[0] {
	case "hold":
		code, err := Hold(args[1:])
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s hold: %v\n", prog, err)
		}
		return code, true
	case "agent":
		if err := Agent(args[1:]); err != nil {
			fmt.Fprintf(os.Stderr, "%s agent: %v\n", prog, err)
			return 1, true
		}
		return 0, true
	}
	return 0, false
}
