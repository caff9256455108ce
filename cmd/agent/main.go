// Command fencedlease-agent is what runs beside a workload, without the operator: `agent`,
// the renewal sidecar the webhook injects, and `hold -- CMD`, which runs CMD only while
// its pod holds the grant. The operator's own binary serves the same two commands; this
// one is a fraction of its size, for the sidecar image and for copying into any image.
package main

import (
	"fmt"
	"os"

	"github.com/fencedlease/fencedlease/internal/agentcmd"
)

const usage = `usage:
  fencedlease-agent agent [--probe] [flags]   renew the injected grant (the sidecar)
  fencedlease-agent hold [flags] -- CMD ...   run CMD while the grant is held
`

func main() {
	code, ran := agentcmd.Run(os.Args[1:])
	if !ran {
		fmt.Fprint(os.Stderr, usage)
		code = 2
	}
	os.Exit(code)
}
