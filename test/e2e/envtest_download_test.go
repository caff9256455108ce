package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fencedlease/fencedlease/test/testenv"
)

// fakeEnvtestRelease serves a setup-envtest index with one 1.37 archive whose etcd and
// kube-apiserver are scripts that print their name; with ok false the archive is missing.
func fakeEnvtestRelease(t *testing.T, ok bool) string {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, name := range []string{"etcd", "kube-apiserver", "kubectl"} {
		body := []byte("#!/bin/sh\necho downloaded " + name + "\n")
		if err := tw.WriteHeader(&tar.Header{Name: "controller-tools/envtest/" + name, Mode: 0o755, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		_, _ = tw.Write(body)
	}
	_ = tw.Close()
	_ = gz.Close()
	sum := sha512.Sum512(buf.Bytes())
	const archive = "envtest-v1.37.2-linux-amd64.tar.gz"
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	mux.HandleFunc("/index.yaml", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "releases:\n  v1.37.2:\n    %s:\n      hash: %s\n      selfLink: %s/%s\n", archive, hex.EncodeToString(sum[:]), srv.URL, archive)
	})
	mux.HandleFunc("/"+archive, func(w http.ResponseWriter, _ *http.Request) {
		if !ok {
			http.NotFound(w, nil)
			return
		}
		_, _ = w.Write(buf.Bytes())
	})
	return srv.URL + "/index.yaml"
}

// runBuild runs hack/envtest/build.sh into a fresh folder that already holds the real
// kube and kwok (so nothing slow is built), and returns the folder and what it said.
func runBuild(t *testing.T, index string, have ...string) (string, string) {
	t.Helper()
	assets, err := testenv.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	for _, name := range append([]string{"kube", "kwok"}, have...) {
		real, err := filepath.EvalSymlinks(filepath.Join(assets, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(real, filepath.Join(out, name)); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("bash", filepath.Join(testenv.RepoRoot(), "hack", "envtest", "build.sh"), out)
	cmd.Env = append(os.Environ(), "ENVTEST_INDEX="+index)
	said, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("build.sh: %v\n%s", err, said)
	}
	return out, string(said)
}

// TestEnvtestDownloadsWhenItCan: make envtest takes etcd and kube-apiserver from
// setup-envtest when the index answers, and says so; kube-scheduler and
// kube-controller-manager still come from the multi-call binary.
func TestEnvtestDownloadsWhenItCan(t *testing.T) {
	out, said := runBuild(t, fakeEnvtestRelease(t, true))
	if !strings.Contains(said, "downloaded etcd and kube-apiserver") {
		t.Errorf("build.sh did not say it downloaded:\n%s", said)
	}
	for _, name := range []string{"etcd", "kube-apiserver"} {
		got, err := exec.Command(filepath.Join(out, name)).Output()
		if err != nil || strings.TrimSpace(string(got)) != "downloaded "+name {
			t.Errorf("%s is not the downloaded one: %q %v", name, got, err)
		}
	}
	for _, name := range []string{"kube-scheduler", "kube-controller-manager"} {
		if target, err := os.Readlink(filepath.Join(out, name)); err != nil || target != "kube" {
			t.Errorf("%s: want a link to kube, got %q %v", name, target, err)
		}
	}
}

// TestEnvtestBuildsWhenTheDownloadFails: with the archive unreachable, build.sh says so and
// falls back to the binaries built from Go modules.
func TestEnvtestBuildsWhenTheDownloadFails(t *testing.T) {
	out, said := runBuild(t, fakeEnvtestRelease(t, false), "etcd")
	if !strings.Contains(said, "setup-envtest could not download") || !strings.Contains(said, "building etcd and kube-apiserver from Go modules instead") {
		t.Errorf("build.sh did not say it fell back:\n%s", said)
	}
	if target, err := os.Readlink(filepath.Join(out, "kube-apiserver")); err != nil || target != "kube" {
		t.Errorf("kube-apiserver: want a link to the built kube, got %q %v", target, err)
	}
}
