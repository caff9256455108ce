package bench

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/client-go/rest"
)

// profileAPIServer saves, in the background, a CPU profile of the API server of seconds
// from after, and logs its top: where the API server's time goes when holders' renewals
// take tens of seconds. The returned func waits for it.
func (b *bench) profileAPIServer(after time.Duration, seconds int) (wait func()) {
	if *apiserverProf == "" {
		return func() {}
	}
	hc, err := rest.HTTPClientFor(b.env.Config)
	if err != nil {
		b.t.Fatal(err)
	}
	url := strings.TrimSuffix(b.env.Config.Host, "/") + fmt.Sprintf("/debug/pprof/profile?seconds=%d", seconds)
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-time.After(after):
		case <-b.ctx.Done():
			return
		}
		ctx, cancel := context.WithTimeout(b.ctx, time.Duration(seconds)*time.Second+time.Minute)
		defer cancel()
		top, err := saveProfile(ctx, hc, url, *apiserverProf, "-nodecount=40")
		if err != nil {
			b.t.Logf("API server profile: %v", err)
			return
		}
		b.t.Logf("API server CPU, %d s from %v after the last grant (%s):\n%s", seconds, after, *apiserverProf, top)
	}()
	return func() { <-done }
}
