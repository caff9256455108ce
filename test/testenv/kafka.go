package testenv

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
)

// Kafka is a throwaway one-broker Kafka on a loopback port: franz-go's kfake, an
// implementation of the Kafka protocol in Go (transactions and producer epochs included),
// run as a process of its own by hack/envtest/kfake — a JVM Kafka broker cannot be had on
// this machine. Pause, Resume and Restart act on the process; the log and the producers'
// state are on disk, fsynced, and survive a Restart.
type Kafka struct {
	*serverProcess
	port int
}

// StartKafka starts one; it stops when the test ends.
func StartKafka(t testing.TB) *Kafka {
	t.Helper()
	assets, err := AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	k := &Kafka{port: FreePort(t)}
	k.serverProcess = startProcess(t, filepath.Join(dir, "kfake.log"), func() *exec.Cmd {
		return exec.Command(filepath.Join(assets, "kfake"), "-port", fmt.Sprint(k.port), "-data-dir", filepath.Join(dir, "data"))
	})
	return k
}

// Addr is host:port, a seed broker.
func (k *Kafka) Addr() string { return fmt.Sprintf("127.0.0.1:%d", k.port) }
