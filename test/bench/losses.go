package bench

import (
	"sync"
	"time"
)

// losses records when holders (pkg/holder) or leaders (client-go) ended on their own
// deadline, by namespace, so both sides are counted over the same stretch of a scenario:
// the whole of it, setup included, or only a failover.
type losses struct {
	mu sync.Mutex
	at map[string][]time.Time
}

func (l *losses) add(ns string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.at == nil {
		l.at = map[string][]time.Time{}
	}
	l.at[ns] = append(l.at[ns], at)
}

// in counts namespace ns's losses.
func (l *losses) in(ns string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.at[ns])
}

// between counts namespace ns's losses from from to to.
func (l *losses) between(ns string, from, to time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, at := range l.at[ns] {
		if !at.Before(from) && !at.After(to) {
			n++
		}
	}
	return n
}
