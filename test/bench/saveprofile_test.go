package bench

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/pprof"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A profile is saved where asked and its top comes back; an answer that is not a profile is
// an error, and nothing is saved.
func TestSaveProfileWritesTheProfileAndReturnsItsTop(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle("/debug/pprof/heap", pprof.Handler("heap"))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	dir := t.TempDir()

	file := filepath.Join(dir, "heap.pprof")
	top, err := saveProfile(context.Background(), srv.Client(), srv.URL+"/debug/pprof/heap", file, "-sample_index=inuse_space")
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(file); err != nil || fi.Size() == 0 {
		t.Fatalf("profile not saved: %v", err)
	}
	if !strings.Contains(string(top), "flat") {
		t.Errorf("top = %q, want pprof's table", top)
	}

	missing := filepath.Join(dir, "missing.pprof")
	if _, err := saveProfile(context.Background(), srv.Client(), srv.URL+"/nothing", missing); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("err = %v, want the 404", err)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("a failed fetch saved %s", missing)
	}
}
