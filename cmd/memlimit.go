package main

import (
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
)

// memoryLimitEnv carries the container's memory limit in bytes (the Deployment fills it
// from resources.limits.memory).
const memoryLimitEnv = "FENCEDLEASE_MEMORY_LIMIT"

// goMemoryShare is the part of the container's limit given to the Go runtime as its soft
// limit. The rest is for what the runtime does not count: the binary's own pages
// (measured: RSS 38 MiB above a 256 MiB GOMEMLIMIT at 10,000 FencedLeases).
const goMemoryShare = 0.85

// setMemoryLimit makes the garbage collector work harder as the heap nears
// goMemoryShare of the container's limit, instead of letting garbage grow into an OOM
// kill. An explicit GOMEMLIMIT wins. It returns the limit set, 0 for none.
func setMemoryLimit(getenv func(string) string) (int64, error) {
	raw := getenv(memoryLimitEnv)
	if raw == "" || getenv("GOMEMLIMIT") != "" {
		return 0, nil
	}
	limit, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || limit <= 0 {
		return 0, fmt.Errorf("%s=%q: want the container's memory limit in bytes", memoryLimitEnv, raw)
	}
	soft := int64(float64(limit) * goMemoryShare)
	debug.SetMemoryLimit(soft)
	return soft, nil
}

// memoryLimitFromEnv is setMemoryLimit on the process's environment.
func memoryLimitFromEnv() (int64, error) { return setMemoryLimit(os.Getenv) }
