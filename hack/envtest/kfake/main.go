// Command kfake runs franz-go's kfake — an implementation of the Kafka protocol in Go,
// transactions and producer fencing included — as a broker process of its own on
// loopback, for the Kafka fence's tests: no Kafka broker (a JVM program) can be installed
// here, and a process the test starts can be paused, killed and restarted like a broker.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"
)

func main() {
	port := flag.Int("port", 9092, "the loopback port to listen on")
	dataDir := flag.String("data-dir", "", "keep the log and the producers' state here, across restarts (none: in memory)")
	flag.Parse()

	opts := []kfake.Opt{kfake.Ports(*port), kfake.AllowAutoTopicCreation()}
	if *dataDir != "" {
		// Every produce fsynced: a kill loses nothing acknowledged, as with acks=all on a real cluster.
		opts = append(opts, kfake.DataDir(*dataDir), kfake.SyncWrites())
	}
	cluster, err := kfake.NewCluster(opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kfake:", err)
		os.Exit(1)
	}
	fmt.Println("kfake: listening on", cluster.ListenAddrs())
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	<-stop
	cluster.Close()
}
