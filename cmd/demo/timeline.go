package main

import (
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
)

// timeline prints events with their time since the demo began, and keeps them.
type timeline struct {
	start time.Time
	mu    sync.Mutex
	lines []string
}

func (t *timeline) add(who, format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	line := fmt.Sprintf("%8.3fs  %-12s %s", time.Since(t.start).Seconds(), who, fmt.Sprintf(format, args...))
	t.lines = append(t.lines, line)
	fmt.Println(line)
}

func logrDiscard() logr.Logger { return logr.Discard() }
