package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// runPack packs static binaries of this machine's platform into an image of their own,
// as the product's are packed (scratch, the files at the root, USER 65532): the tests'
// workload images.
func runPack(args []string) error {
	fs := flags("pack")
	out := fs.String("out", "", "folder to write the OCI image layout into")
	entrypoint := fs.String("entrypoint", "", "the entrypoint (default: the first file)")
	_ = fs.Parse(args)
	if *out == "" || fs.NArg() == 0 {
		return fmt.Errorf("-out and at least one file are required")
	}
	dir := filepath.Dir(fs.Arg(0))
	img := Image{Name: filepath.Base(*out)}
	for _, f := range fs.Args() {
		if filepath.Dir(f) != dir {
			return fmt.Errorf("%s: every file must be in one folder (%s)", f, dir)
		}
		img.Binaries = append(img.Binaries, filepath.Base(f))
	}
	img.Entrypoint = []string{"/" + img.Binaries[0]}
	if *entrypoint != "" {
		img.Entrypoint = strings.Fields(*entrypoint)
	}
	p := v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
	image, err := build(img, dir, p, labels{version: "test"}, time.Unix(0, 0))
	if err != nil {
		return err
	}
	idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex),
		mutate.IndexAddendum{Add: image, Descriptor: v1.Descriptor{Platform: &p}})
	if err := os.RemoveAll(*out); err != nil {
		return err
	}
	_, err = layout.Write(*out, idx)
	return err
}
