package main

import (
	"archive/tar"
	"encoding/json"
	"io"
	"os"

	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// Description is what describe prints for each platform of an image: what the test of
// the Dockerfile compares, and the sizes the README quotes.
type Description struct {
	Platform   string            `json:"platform"`
	Digest     string            `json:"digest"`
	User       string            `json:"user"`
	Entrypoint []string          `json:"entrypoint"`
	Labels     map[string]string `json:"labels"`
	Files      []File            `json:"files"`
	// Compressed is the bytes a pull transfers: the layers as stored.
	Compressed int64 `json:"compressedBytes"`
}

// File is one file of the image's layers.
type File struct {
	Path string `json:"path"`
	Mode int64  `json:"mode"`
	UID  int    `json:"uid"`
	Size int64  `json:"size"`
	// Link is what a symbolic link points to.
	Link string `json:"link,omitempty"`
}

func runDescribe(args []string) error {
	fs := flags("describe")
	dir := fs.String("layout", "", "an OCI image layout written by images build")
	_ = fs.Parse(args)
	out, err := describe(*dir)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// describe reads an image's every platform from its layout.
func describe(dir string) ([]Description, error) {
	path, err := layout.FromPath(dir)
	if err != nil {
		return nil, err
	}
	// The layout's index.json is the image's index (images build writes it so).
	idx, err := path.ImageIndex()
	if err != nil {
		return nil, err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	var out []Description
	for _, d := range m.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			return nil, err
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, err
		}
		desc := Description{
			Platform: d.Platform.OS + "/" + d.Platform.Architecture, Digest: d.Digest.String(),
			User: cf.Config.User, Entrypoint: cf.Config.Entrypoint, Labels: cf.Config.Labels,
		}
		layers, err := img.Layers()
		if err != nil {
			return nil, err
		}
		for _, l := range layers {
			size, err := l.Size()
			if err != nil {
				return nil, err
			}
			desc.Compressed += size
			rc, err := l.Uncompressed()
			if err != nil {
				return nil, err
			}
			tr := tar.NewReader(rc)
			for {
				h, err := tr.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					return nil, err
				}
				desc.Files = append(desc.Files, File{Path: "/" + h.Name, Mode: h.Mode, UID: h.Uid, Size: h.Size, Link: h.Linkname})
			}
			rc.Close()
		}
		out = append(out, desc)
	}
	return out, nil
}
