package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// fakeBinaries writes a file for every binary of every image and stand-in under bin/<platform>/.
func fakeBinaries(t *testing.T, platforms ...string) string {
	bin := t.TempDir()
	names := []string{}
	for _, img := range Images {
		names = append(names, img.Binaries...)
	}
	for _, s := range Standins {
		names = append(names, s.Name)
	}
	for _, p := range platforms {
		{
			for _, b := range names {
				dir := filepath.Join(bin, p)
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, b), []byte(p+"/"+b), 0o700); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	return bin
}

func buildInto(t *testing.T, bin string) string {
	out := t.TempDir()
	if err := runBuild([]string{"-bin", bin, "-out", out, "-version", "v1.2.3", "-revision", "abc", "-source", "https://example.com/src",
		"-created", "2026-12-04T00:00:00Z"}); err != nil {
		t.Fatal(err)
	}
	return out
}

func digestOf(t *testing.T, dir string) string {
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	d, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

// TestBuildIsReproducible: the same binaries and labels give the same index digests, in
// another folder, at another time; another binary gives another digest.
func TestBuildIsReproducible(t *testing.T) {
	bin := fakeBinaries(t, "linux_amd64", "linux_arm64")
	a, b := buildInto(t, bin), buildInto(t, bin)
	for _, img := range Images {
		if da, db := digestOf(t, filepath.Join(a, img.Name)), digestOf(t, filepath.Join(b, img.Name)); da != db {
			t.Errorf("%s: two builds gave %s and %s", img.Name, da, db)
		}
	}
	if err := os.WriteFile(filepath.Join(bin, "linux_arm64", "fencedlease-agent"), []byte("changed"), 0o700); err != nil {
		t.Fatal(err)
	}
	c := buildInto(t, bin)
	if digestOf(t, filepath.Join(a, "fencedlease-agent")) == digestOf(t, filepath.Join(c, "fencedlease-agent")) {
		t.Error("a changed binary left the agent image's digest as it was")
	}
}

// TestBuildIndexHoldsEveryPlatform: one index, a manifest per platform, each with the
// Dockerfile's user and entrypoint, the binaries at the root, executable, owned by root,
// and the OCI labels.
func TestBuildIndexHoldsEveryPlatform(t *testing.T) {
	out := buildInto(t, fakeBinaries(t, "linux_arm64", "linux_amd64"))
	for _, img := range Images {
		descs, err := describe(filepath.Join(out, img.Name))
		if err != nil {
			t.Fatal(err)
		}
		if len(descs) != 2 || descs[0].Platform != "linux/amd64" || descs[1].Platform != "linux/arm64" {
			t.Fatalf("%s: platforms %+v, want linux/amd64 and linux/arm64", img.Name, descs)
		}
		for _, d := range descs {
			if d.User != "65532:65532" || len(d.Entrypoint) != 1 || d.Entrypoint[0] != img.Entrypoint[0] {
				t.Errorf("%s %s: user %q entrypoint %v", img.Name, d.Platform, d.User, d.Entrypoint)
			}
			if len(d.Files) != len(img.Binaries) {
				t.Errorf("%s %s: files %+v, want %v", img.Name, d.Platform, d.Files, img.Binaries)
			}
			for i, f := range d.Files {
				if f.Path != "/"+img.Binaries[i] || f.Mode != 0o755 || f.UID != 0 {
					t.Errorf("%s %s: file %+v", img.Name, d.Platform, f)
				}
			}
			for k, v := range map[string]string{"org.opencontainers.image.version": "v1.2.3", "org.opencontainers.image.revision": "abc",
				"org.opencontainers.image.source": "https://example.com/src"} {
				if d.Labels[k] != v {
					t.Errorf("%s %s: label %s = %q, want %q", img.Name, d.Platform, k, d.Labels[k], v)
				}
			}
		}
	}
}
