package main

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The manifest names an archive per platform with its real sha256; the archive holds what
// the manifest's files and bin say, and the binary in it runs as the kubectl plugin.
func TestReleaseArchiveAndManifest(t *testing.T) {
	t.Chdir("../..") // builds ./cmd/kubectl-fencedlease from the module root
	out := t.TempDir()
	host := runtime.GOOS + "/" + runtime.GOARCH
	if err := run("v1.2.3", out, []string{host}); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(out, "fencedlease.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var m Plugin
	if err := yaml.UnmarshalStrict(raw, &m); err != nil {
		t.Fatal(err)
	}
	if m.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || m.Kind != "Plugin" || m.Metadata.Name != "fencedlease" ||
		m.Spec.Version != "v1.2.3" || m.Spec.ShortDescription == "" || len(m.Spec.Platforms) != 1 {
		t.Fatalf("manifest:\n%s", raw)
	}
	p := m.Spec.Platforms[0]
	name := filepath.Base(p.URI)
	if p.Selector.MatchLabels["os"] != runtime.GOOS || p.Selector.MatchLabels["arch"] != runtime.GOARCH ||
		!strings.Contains(p.URI, "/v1.2.3/") || !strings.Contains(name, "v1.2.3") {
		t.Fatalf("platform %+v", p)
	}
	archive, err := os.ReadFile(filepath.Join(out, name))
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(archive); hex.EncodeToString(sum[:]) != p.Sha256 {
		t.Fatalf("sha256 of %s is %x, the manifest says %s", name, sum, p.Sha256)
	}

	dir := t.TempDir()
	extract(t, filepath.Join(out, name), dir)
	for _, f := range p.Files {
		if _, err := os.Stat(filepath.Join(dir, f.From)); err != nil {
			t.Errorf("the archive lacks %s, which the manifest installs", f.From)
		}
	}
	help, err := exec.Command(filepath.Join(dir, p.Bin), "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(help), "kubectl fencedlease [command]") {
		t.Fatalf("%s --help: %v\n%s", p.Bin, err, help)
	}
	if err := run("1.2", out, []string{host}); err == nil {
		t.Error("a version that is not v-prefixed semver was accepted")
	}
}

func extract(t *testing.T, archive, dir string) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		dst, err := os.OpenFile(filepath.Join(dir, filepath.Base(h.Name)), os.O_CREATE|os.O_WRONLY, os.FileMode(h.Mode))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(dst, tr); err != nil {
			t.Fatal(err)
		}
		dst.Close()
	}
}
