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
			page, err := b.op.Scrape(time.Second)
			if err != nil {
				b.t.Logf("%s: +%v: scrape: %v", what, time.Since(stoppedAt).Round(100*time.Millisecond), err)
				continue
			}
			b.t.Logf("%s: +%v: %v", what, time.Since(stoppedAt).Round(100*time.Millisecond), parseQueueSample(page, "fencedlease"))
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { close(done); <-finished }) }
	b.t.Cleanup(stop) // a failed measurement ends the test before stop: never log after it
	return stop
}
