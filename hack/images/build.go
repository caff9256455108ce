package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

type labels struct{ version, revision, source string }

func runBuild(args []string) error {
	fs := flags("build")
	bin := fs.String("bin", "", "folder with one <os>_<arch> folder of static binaries per platform")
	out := fs.String("out", "", "folder to write one OCI image layout per image into")
	version := fs.String("version", "dev", "org.opencontainers.image.version")
	revision := fs.String("revision", "", "org.opencontainers.image.revision (the commit)")
	source := fs.String("source", "", "org.opencontainers.image.source")
	created := fs.String("created", "1970-01-01T00:00:00Z", "creation time, RFC 3339 (the commit's time keeps the digest reproducible)")
	_ = fs.Parse(args)
	if *bin == "" || *out == "" {
		return fmt.Errorf("-bin and -out are required")
	}
	at, err := time.Parse(time.RFC3339, *created)
	if err != nil {
		return fmt.Errorf("-created: %w", err)
	}
	platforms, err := platformsIn(*bin)
	if err != nil {
		return err
	}
	l := labels{version: *version, revision: *revision, source: *source}
	for _, img := range Images {
		err := writeIndex(*out, img.Name, platforms, func(p v1.Platform) (v1.Image, error) {
			return build(img, filepath.Join(*bin, p.OS+"_"+p.Architecture), p, l, at)
		})
		if err != nil {
			return err
		}
	}
	for _, s := range Standins {
		err := writeIndex(*out, s.Name, platforms, func(p v1.Platform) (v1.Image, error) {
			return buildStandin(s, filepath.Join(*bin, p.OS+"_"+p.Architecture), p, at)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// writeIndex writes out/name: one image index, a manifest per platform.
func writeIndex(out, name string, platforms []v1.Platform, image func(v1.Platform) (v1.Image, error)) error {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range platforms {
		img, err := image(p)
		if err != nil {
			return fmt.Errorf("%s %s/%s: %w", name, p.OS, p.Architecture, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
	}
	dir := filepath.Join(out, name)
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if _, err := layout.Write(dir, idx); err != nil {
		return err
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("%s\t%s\t%s\n", name, dir, digest)
	return nil
}

// platformsIn lists the <os>_<arch> folders of dir, sorted, so the index is the same
// whatever order the file system gives.
func platformsIn(dir string) ([]v1.Platform, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var ps []v1.Platform
	for _, e := range entries {
		osName, arch, ok := strings.Cut(e.Name(), "_")
		if e.IsDir() && ok {
			ps = append(ps, v1.Platform{OS: osName, Architecture: arch})
		}
	}
	if len(ps) == 0 {
		return nil, fmt.Errorf("no <os>_<arch> folder in %s", dir)
	}
	slices.SortFunc(ps, func(a, b v1.Platform) int { return strings.Compare(a.Architecture, b.Architecture) })
	return ps, nil
}

func build(img Image, bin string, p v1.Platform, l labels, at time.Time) (v1.Image, error) {
	layerTar, err := layerOf(bin, img.Binaries)
	if err != nil {
		return nil, err
	}
	return imageOf(layerTar, "images build: COPY "+strings.Join(img.Binaries, " ")+" /", p, at, func(c *v1.Config) {
		c.User = User
		c.Entrypoint = img.Entrypoint
		c.Labels = map[string]string{
			"org.opencontainers.image.title":    img.Name,
			"org.opencontainers.image.version":  l.version,
			"org.opencontainers.image.revision": l.revision,
			"org.opencontainers.image.source":   l.source,
			"org.opencontainers.image.created":  at.UTC().Format(time.RFC3339),
		}
	})
}

// imageOf is an image of one layer (layerTar) for platform p, created at, with its
// config set by config.
func imageOf(layerTar []byte, createdBy string, p v1.Platform, at time.Time, config func(*v1.Config)) (v1.Image, error) {
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	image, err := mutate.Append(base, mutate.Addendum{
		Layer:     layer,
		History:   v1.History{Created: v1.Time{Time: at}, CreatedBy: createdBy},
		MediaType: types.OCILayer,
	})
	if err != nil {
		return nil, err
	}
	cf, err := image.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = p.OS, p.Architecture, p.Variant
	cf.Created = v1.Time{Time: at}
	config(&cf.Config)
	return mutate.ConfigFile(image, cf)
}

// layerOf is the tar of the binaries at the root, owned by root and executable by all as
// the Dockerfile's COPY leaves them, with a fixed time so the digest depends on content only.
func layerOf(bin string, binaries []string) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range binaries {
		data, err := os.ReadFile(filepath.Join(bin, name))
		if err != nil {
			return nil, err
		}
		hdr := &tar.Header{
			Typeflag: tar.TypeReg, Name: name, Mode: 0o755, Size: int64(len(data)),
			ModTime: time.Unix(0, 0), Format: tar.FormatUSTAR,
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
