package bench

import (
	"context"
	"net/http"
	"time"
)

// saveHeapProfile writes the operator's heap profile to -bench.heap-profile and logs what
// holds its memory (go tool pprof -top), so an RSS number comes with its reasons.
func (b *bench) saveHeapProfile() {
	if *heapProf == "" {
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	top, err := saveProfile(ctx, http.DefaultClient, "http://"+b.pprof+"/debug/pprof/heap?gc=1", *heapProf, "-sample_index=inuse_space")
	if err != nil {
		b.t.Errorf("heap profile: %v", err)
		return
	}
	b.t.Logf("operator heap (%s):\n%s", *heapProf, top)
}
