package main

import (
	"fmt"
	"os"
	"time"
)

// hoarded keeps what CRASH_OOM allocates reachable, so the collector cannot free it.
var hoarded [][]byte

// crashAfterWhile makes the process crash CRASH_AFTER after it started, as a workload in a
// crash loop does: with exit code 1, or with CRASH_OOM=1 by allocating memory until its
// container's limit kills it (OOMKilled). With CRASH_ONCE (a file in a volume that
// outlives the container) it crashes only when that file is absent, and writes it first:
// one crash, then it runs.
func crashAfterWhile() {
	after, err := time.ParseDuration(os.Getenv("CRASH_AFTER"))
	if err != nil {
		return
	}
	once := os.Getenv("CRASH_ONCE")
	if once != "" {
		if _, err := os.Stat(once); err == nil {
			return
		}
	}
	go func() {
		time.Sleep(after)
		if once != "" {
			if err := os.WriteFile(once, nil, 0o600); err != nil {
				fmt.Println("crash once:", err)
				return
			}
		}
		fmt.Printf("T=%d crashing\n", time.Now().UnixNano())
		if os.Getenv("CRASH_OOM") == "1" {
			for {
				b := make([]byte, 1<<20)
				for i := range b {
					b[i] = 1
				}
				hoarded = append(hoarded, b)
			}
		}
		os.Exit(1)
	}()
}
