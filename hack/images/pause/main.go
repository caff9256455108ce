// Command pause is the real nodes' sandbox image (internal/realcluster, make cluster): it holds
// a pod's namespaces and does nothing until it is told to stop. Nothing can be pulled from
// outside here, so the sandbox image is built here too.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
}
