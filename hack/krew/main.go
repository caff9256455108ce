// Command krew builds the kubectl plugin's release archives and writes its krew manifest
// (the plugin index's format), with each archive's sha256:
//
//	go run ./hack/krew -version v0.1.0 -out bin/plugin
//
// Upload the archives to the release named by -version; the manifest's URIs point there.
package main

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"
)

const (
	pkg        = "./cmd/kubectl-fencedlease"
	completion = "cmd/kubectl-fencedlease/kubectl_complete-fencedlease"
	releases   = "https://github.com/fencedlease/fencedlease/releases/download"
)

func main() {
	version := flag.String("version", "v0.1.0", "The release's version (semver with a leading v).")
	out := flag.String("out", "bin/plugin", "Where the archives and fencedlease.yaml go.")
	platforms := flag.String("platforms", "linux/amd64,linux/arm64,darwin/amd64,darwin/arm64,windows/amd64", "os/arch pairs to build.")
	flag.Parse()
	if err := run(*version, *out, strings.Split(*platforms, ",")); err != nil {
		fmt.Fprintln(os.Stderr, "krew:", err)
		os.Exit(1)
	}
}

var semver = regexp.MustCompile(`^v\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`)

func run(version, out string, platforms []string) error {
	if !semver.MatchString(version) {
		return fmt.Errorf("version %q is not semver with a leading v (v1.2.3)", version)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	m := manifest(version)
	for _, p := range platforms {
		goos, goarch, ok := strings.Cut(p, "/")
		if !ok {
			return fmt.Errorf("platform %q is not os/arch", p)
		}
		archive, sum, err := buildArchive(goos, goarch, version, out)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		m.Spec.Platforms = append(m.Spec.Platforms, platform(goos, goarch, version, filepath.Base(archive), sum))
	}
	raw, err := yaml.Marshal(m)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, "fencedlease.yaml"), raw, 0o644)
}

// buildArchive cross-compiles the plugin and packs it with its completion script.
func buildArchive(goos, goarch, version, out string) (string, string, error) {
	work, err := os.MkdirTemp("", "krew-")
	if err != nil {
		return "", "", err
	}
	defer os.RemoveAll(work)
	bin := binName(goos)
	build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", filepath.Join(work, bin), pkg)
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch)
	if b, err := build.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("go build: %v\n%s", err, b)
	}
	archive := filepath.Join(out, fmt.Sprintf("kubectl-fencedlease_%s_%s_%s.tar.gz", version, goos, goarch))
	f, err := os.Create(archive)
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	h := sha256.New()
	gz := gzip.NewWriter(io.MultiWriter(f, h))
	tw := tar.NewWriter(gz)
	files := []struct{ src, name string }{{filepath.Join(work, bin), bin}}
	if goos != "windows" { // a shell script: kubectl on Windows cannot run it
		files = append(files, struct{ src, name string }{completion, filepath.Base(completion)})
	}
	for _, file := range files {
		if err := addFile(tw, file.src, file.name); err != nil {
			return "", "", err
		}
	}
	if err := tw.Close(); err != nil {
		return "", "", err
	}
	if err := gz.Close(); err != nil {
		return "", "", err
	}
	return archive, hex.EncodeToString(h.Sum(nil)), f.Close()
}

func addFile(tw *tar.Writer, src, name string) error {
	raw, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(raw)), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	_, err = tw.Write(raw)
	return err
}

func binName(goos string) string {
	if goos == "windows" {
		return "kubectl-fencedlease.exe"
	}
	return "kubectl-fencedlease"
}
