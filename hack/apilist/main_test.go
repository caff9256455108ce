package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The committed listings are what the code exports now: a changed exported name,
// signature, field or constant fails here (and in make verify) until `make api-list` is
// run and the change is noted in CHANGELOG.md.
func TestTheCommittedListingsMatchTheCode(t *testing.T) {
	out := t.TempDir()
	if err := run(out, []string{"github.com/fencedlease/fencedlease/api/...", "github.com/fencedlease/fencedlease/pkg/..."}); err != nil {
		t.Fatal(err)
	}
	got, _ := filepath.Glob(filepath.Join(out, "*.txt"))
	if len(got) < 3 {
		t.Fatalf("listed %d packages, want api/v1alpha1, pkg/fence and pkg/holder at least", len(got))
	}
	for _, f := range got {
		fresh, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		committed, err := os.ReadFile(filepath.Join("..", "..", "api", "exported", filepath.Base(f)))
		if err != nil {
			t.Fatalf("%s is not committed: run make api-list", filepath.Base(f))
		}
		if string(fresh) != string(committed) {
			t.Errorf("api/exported/%s is stale: the exported API changed; run make api-list and note it in CHANGELOG.md", filepath.Base(f))
		}
	}
	holder, _ := os.ReadFile(filepath.Join(out, "pkg-holder.txt"))
	for _, want := range []string{
		"func Start(ctx context.Context, cfg Config) (*Holder, error)",
		"method (*Holder) Deadline() time.Time",
		"type Config struct, Callbacks Callbacks",
		"const ExitGrantLost untyped int = 75",
		"type LeaseClients interface, Leases(namespace string) LeaseClient",
	} {
		if !strings.Contains(string(holder), want+"\n") {
			t.Errorf("pkg-holder.txt lacks %q", want)
		}
	}
}
