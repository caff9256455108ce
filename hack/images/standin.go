package main

import (
	"archive/tar"
	"bytes"
	_ "embed"
	"os"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Standin is another project's image that make cluster's registry serves under that
// project's own name and tag (the nodes' docker.io mirror), so config/samples run there as
// written. It is one multi-call binary built here (hack/images/NAME), linked in /bin under
// each of its applets' names, with a world-writable /tmp; it runs as root, as the original
// does. It is not the original: it has only the applets it lists.
type Standin struct {
	Name, Tag string
	Applets   []string
}

//go:embed busybox/applets.txt
var busyboxApplets string

// Standins are the images the samples name that are not the project's own.
var Standins = []Standin{{Name: "busybox", Tag: "1.36", Applets: strings.Fields(busyboxApplets)}}

func buildStandin(s Standin, bin string, p v1.Platform, at time.Time) (v1.Image, error) {
	data, err := os.ReadFile(filepath.Join(bin, s.Name))
	if err != nil {
		return nil, err
	}
	layerTar, err := standinLayer(s, data)
	if err != nil {
		return nil, err
	}
	return imageOf(layerTar, "images build: stand-in for "+s.Name+":"+s.Tag, p, at, func(c *v1.Config) {
		c.Env = []string{"PATH=/bin"}
		c.Cmd = []string{"sh"}
		c.Labels = map[string]string{
			"org.opencontainers.image.title":       s.Name + " stand-in",
			"org.opencontainers.image.description": "make cluster's stand-in for " + s.Name + ":" + s.Tag + " (applets: " + strings.Join(s.Applets, " ") + ")",
		}
	})
}

// standinLayer is /bin/NAME, /bin/APPLET → NAME for each applet, and /tmp, with fixed
// times so the digest depends on content only.
func standinLayer(s Standin, binary []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	hdrs := []*tar.Header{
		{Typeflag: tar.TypeDir, Name: "bin/", Mode: 0o755, ModTime: epoch},
		{Typeflag: tar.TypeDir, Name: "tmp/", Mode: 0o1777, ModTime: epoch},
		{Typeflag: tar.TypeReg, Name: "bin/" + s.Name, Mode: 0o755, Size: int64(len(binary)), ModTime: epoch},
	}
	for _, a := range s.Applets {
		hdrs = append(hdrs, &tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + a, Linkname: s.Name, Mode: 0o777, ModTime: epoch})
	}
	for _, h := range hdrs {
		h.Format = tar.FormatUSTAR
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(binary); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
