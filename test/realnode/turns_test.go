package realnode

import "sync"

// turns lets specs run side by side, at most a given number at once, starting in the
// order they are numbered: the longest are listed first, so the last to start are short.
type turns struct {
	mu   sync.Mutex
	cond *sync.Cond
	next int // the number of the spec whose turn to start it is
	free int // how many more may run now
}

func newTurns(atOnce int) *turns {
	q := &turns{free: atOnce}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// wait blocks until spec i may start: every spec numbered before it has started, and
// fewer than atOnce are running.
func (q *turns) wait(i int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.next != i || q.free == 0 {
		q.cond.Wait()
	}
	q.next++
	q.free--
	q.cond.Broadcast()
}

// done ends a spec's turn.
func (q *turns) done() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.free++
	q.cond.Broadcast()
}
