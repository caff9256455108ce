package main

import (
	"fmt"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

func runPush(args []string) error {
	fs := flags("push")
	dir := fs.String("layout", "", "an OCI image layout written by images build")
	ref := fs.String("ref", "", "where to push it: REGISTRY/REPOSITORY:TAG")
	insecure := fs.Bool("insecure", false, "plain HTTP (a registry on loopback)")
	_ = fs.Parse(args)
	if *dir == "" || *ref == "" {
		return fmt.Errorf("-layout and -ref are required")
	}
	digest, err := push(*dir, *ref, *insecure)
	if err != nil {
		return err
	}
	fmt.Printf("%s@%s\n", *ref, digest)
	return nil
}

// push writes the layout's one index to ref with the credentials docker login or a
// registry's credential helper left in ~/.docker/config.json (no Docker engine needed).
func push(dir, ref string, insecure bool) (string, error) {
	var opts []name.Option
	if insecure {
		opts = append(opts, name.Insecure)
	}
	tag, err := name.ParseReference(ref, opts...)
	if err != nil {
		return "", err
	}
	path, err := layout.FromPath(dir)
	if err != nil {
		return "", err
	}
	// The layout's index.json is the image's index (images build writes it so).
	image, err := path.ImageIndex()
	if err != nil {
		return "", err
	}
	if err := remote.WriteIndex(tag, image, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return "", err
	}
	digest, err := image.Digest()
	return digest.String(), err
}
