package bench

import (
	"sync"
	"time"
)

// sampleQueue logs, once a second from stoppedAt until the returned stop is called, the
// operator's running reconciles and its ready queue by priority (-bench.queue-timeline):
// where the due work of a mass failover waits, in the queue or in the workers.
func (b *bench) sampleQueue(what string, stoppedAt time.Time) (stop func()) {
	if !*queueTimeline {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			at := time.Since(stoppedAt).Round(100 * time.Millisecond)
			page, err := b.op.Scrape(time.Second)
			var s queueSample
			if err == nil {
				s, err = parseQueueSample(page, "fencedlease")
			}
			if err != nil {
				b.t.Logf("%s: +%v: %v", what, at, err)
				continue
			}
			b.t.Logf("%s: +%v: %v", what, at, s)
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { close(done); <-finished }) }
	b.t.Cleanup(stop) // a failed measurement ends the test before stop: never log after it
	return stop
}
