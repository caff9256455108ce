package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
)

// saveProfile fetches a pprof profile from url with hc, writes it to file, and returns what
// `go tool pprof -top` with topArgs says of it (its error too, should it fail: the profile
// is saved all the same).
func saveProfile(ctx context.Context, hc *http.Client, url, file string, topArgs ...string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", resp.Status, raw)
	}
	if err := os.WriteFile(file, raw, 0o600); err != nil {
		return nil, err
	}
	top, err := exec.CommandContext(ctx, "go", append(append([]string{"tool", "pprof", "-top"}, topArgs...), file)...).CombinedOutput()
	if err != nil {
		top = fmt.Appendf(top, "go tool pprof: %v\n", err)
	}
	return top, nil
}
