package realnode

import (
	"slices"
	"sync"
	"testing"
	"time"
)

// TestTurns: specs start in their numbered order, never more than atOnce at a time.
func TestTurns(t *testing.T) {
	run := func(atOnce int) (started []int, most int) {
		q := newTurns(atOnce)
		var mu sync.Mutex
		running := 0
		var wg sync.WaitGroup
		for i := 5; i >= 0; i-- { // asked for in the reverse order
			wg.Add(1)
			go func() {
				defer wg.Done()
				q.wait(i)
				defer q.done()
				mu.Lock()
				started = append(started, i)
				running++
				most = max(most, running)
				mu.Unlock()
				time.Sleep(10 * time.Millisecond)
				mu.Lock()
				running--
				mu.Unlock()
			}()
		}
		wg.Wait()
		return started, most
	}
	if started, _ := run(1); !slices.Equal(started, []int{0, 1, 2, 3, 4, 5}) {
		t.Errorf("one at a time, started in the order %v, want 0…5", started)
	}
	if _, most := run(2); most != 2 {
		t.Errorf("two at a time, %d ran at once", most)
	}
}
