package bench

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
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
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+b.pprof+"/debug/pprof/heap?gc=1", nil)
	if err != nil {
		b.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.t.Errorf("heap profile: %v", err)
		return
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Errorf("heap profile: %v", err)
		return
	}
	if err := os.WriteFile(*heapProf, raw, 0o600); err != nil {
		b.t.Errorf("heap profile: %v", err)
		return
	}
	top, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-sample_index=inuse_space", *heapProf).CombinedOutput()
	if err != nil {
		b.t.Logf("go tool pprof: %v", err)
	}
	b.t.Logf("operator heap (%s):\n%s", *heapProf, top)
}
