package main

// The images and what each holds: the Dockerfile's agent and operator stages, and pause. The test
// test/e2e/images_test.go reads the Dockerfile and fails when the two disagree.

// User is the Dockerfile's USER in both images: no root, no name (scratch has no passwd).
const User = "65532:65532"

// Image is one image: its files (each a binary of the build stage, copied to /NAME) and
// its entrypoint.
type Image struct {
	Name       string
	Binaries   []string
	Entrypoint []string
}

// Images are the two images, named as the default IMG and AGENT_IMG, and the real nodes'
// sandbox image (hack/images/pause), which only make cluster and the tests use.
var Images = []Image{
	{Name: "fencedlease", Binaries: []string{"fencedlease", "invoice-scheduler"}, Entrypoint: []string{"/fencedlease"}},
	{Name: "fencedlease-agent", Binaries: []string{"fencedlease-agent"}, Entrypoint: []string{"/fencedlease-agent"}},
	{Name: "pause", Binaries: []string{"pause"}, Entrypoint: []string{"/pause"}},
}
