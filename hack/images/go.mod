// make images and make push: the Dockerfile's two images built and pushed without a Docker
// engine, and the registry the real-node tests pull from. Its own module, so
// go-containerregistry stays out of the operator's dependencies.
module github.com/fencedlease/fencedlease/hack/images

go 1.26.0

require (
	github.com/google/go-containerregistry v0.22.1
	mvdan.cc/sh/v3 v3.14.1
)

require (
	github.com/docker/cli v29.7.2+incompatible // indirect
	github.com/docker/docker-credential-helpers v0.9.3 // indirect
	github.com/klauspost/compress v1.19.2 // indirect
	github.com/opencontainers/go-digest v1.0.0 // indirect
	github.com/opencontainers/image-spec v1.1.1 // indirect
	github.com/sirupsen/logrus v1.9.4 // indirect
	golang.org/x/sync v0.22.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
	golang.org/x/term v0.45.0 // indirect
	gotest.tools/v3 v3.5.2 // indirect
)
