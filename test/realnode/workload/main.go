// Command workload is the real-node suite's workload: it answers HTTP on :8080 with its
// host name (the pod's name), and prints a line whenever the token it sees changes: in its
// environment (FENCING_TOKEN) and in the downward-API file /etc/fencing/token, with the
// time in Unix nanoseconds, so the suite can tell when a grant reached it. On SIGTERM it
// prints when it stopped. With LEDGER_DSN it writes through the SQL fence (writer.go),
// while the agent's state file says it holds, or with HOLDER=pkg while its own
// pkg/holder Holder does (grant.go); WRITE_LOG and ZOMBIE_ONE_IN serve the chaos run.
// With WORK_UNTIL (Unix seconds) it ends then (a batch run). With CRASH_AFTER (a Go
// duration) it crashes that long after it started (crash.go).
// Packed with fencedlease-agent into the suite's image, so
// `fencedlease-agent hold -- /workload` runs in a container.
package main

import (
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strconv"
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
	stopWriting := make(chan struct{})
	writerDone := make(chan struct{})
	if dsn := os.Getenv("LEDGER_DSN"); dsn != "" {
		go func() { defer close(writerDone); startWriting(dsn, name, stopWriting) }()
	} else {
		close(writerDone)
	}
	crashAfterWhile()
	var done <-chan time.Time
	if until, err := strconv.ParseInt(os.Getenv("WORK_UNTIL"), 10, 64); err == nil {
		done = time.After(time.Until(time.Unix(until, 0)))
	}
	env := os.Getenv("FENCING_TOKEN")
	last := ""
	report := func() {
		raw, _ := os.ReadFile("/etc/fencing/token")
		now := fmt.Sprintf("env=%s file=%s", env, strings.TrimSpace(string(raw)))
		if now != last {
			fmt.Printf("T=%d %s\n", time.Now().UnixNano(), now)
			last = now
		}
	}
	report() // at once: a run whose time is up still says what it saw
	tick := time.NewTicker(20 * time.Millisecond)
	for {
		select {
		case <-sig:
			close(stopWriting)
			// The write under way ends and is told (WRITE_LOG) before the process does.
			select {
			case <-writerDone:
			case <-time.After(2 * time.Second):
			}
			fmt.Printf("T=%d stopped\n", time.Now().UnixNano())
			return
		case <-done:
			fmt.Printf("T=%d done\n", time.Now().UnixNano())
			return
		case <-tick.C:
			report()
		}
	}
}
