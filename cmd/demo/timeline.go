package main

import (
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
)

// timeline prints events with their time since the demo began, and keeps them.
type timeline struct {
	start   time.Time
	mu      sync.Mutex
	lines   []string
	entries []entry
}

// entry is one line of the timeline as the picture reads it.
type entry struct {
	at   float64 // seconds since the demo began
	who  string
	text string
}

func (t *timeline) add(who, format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	at, text := time.Since(t.start).Seconds(), fmt.Sprintf(format, args...)
	line := fmt.Sprintf("%8.3fs  %-12s %s", at, who, text)
	t.lines = append(t.lines, line)
	t.entries = append(t.entries, entry{at: at, who: who, text: text})
	fmt.Println(line)
}

// snapshot is the entries so far.
func (t *timeline) snapshot() []entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]entry(nil), t.entries...)
}

func logrDiscard() logr.Logger { return logr.Discard() }
