// Command workload is the real-node suite's workload: it answers HTTP on :8080 with its
// host name (the pod's name), and prints a line whenever the token it sees changes: in its
// environment (FENCING_TOKEN) and in the downward-API file /etc/fencing/token, with the
// time in Unix nanoseconds, so the suite can tell when a grant reached it. On SIGTERM it
// prints when it stopped. Packed with fencedlease-agent into the suite's image, so
// `fencedlease-agent hold -- /workload` runs in a container.
package main

import (
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	name, _ := os.Hostname()
	http.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, name) })
	go func() {
		if err := http.ListenAndServe(":8080", nil); err != nil {
			fmt.Println("serve:", err)
		}
	}()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	env := os.Getenv("FENCING_TOKEN")
	last := ""
	tick := time.NewTicker(20 * time.Millisecond)
	for {
		select {
		case <-sig:
			fmt.Printf("T=%d stopped\n", time.Now().UnixNano())
			return
		case <-tick.C:
			raw, _ := os.ReadFile("/etc/fencing/token")
			now := fmt.Sprintf("env=%s file=%s", env, strings.TrimSpace(string(raw)))
			if now != last {
				fmt.Printf("T=%d %s\n", time.Now().UnixNano(), now)
				last = now
			}
		}
	}
}
