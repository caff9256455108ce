package realcluster

import (
	"fmt"
	"os"
	"path/filepath"
)

// madeImages are make images' layouts (folders of bin/images) and the reference the
// registry serves each as: the project's images as NAME:dev, and the samples' stand-in
// under the name and tag config/samples pull (hack/images/standin.go).
var madeImages = map[string]string{
	"fencedlease": "fencedlease", "fencedlease-agent": "fencedlease-agent", "pause": "pause",
	"busybox": "busybox:1.36",
}

// MadeImages are the layouts of make images in dir (bin/images), keyed by the reference
// the registry serves each as: what Options.Images takes.
func MadeImages(dir string) (map[string]string, error) {
	layouts := map[string]string{}
	for folder, ref := range madeImages {
		layout, err := filepath.Abs(filepath.Join(dir, folder))
		if err != nil {
			return nil, err
		}
		if _, err := os.Stat(filepath.Join(layout, "index.json")); err != nil {
			return nil, fmt.Errorf("no image %s in %s: run 'make images'", folder, dir)
		}
		layouts[ref] = layout
	}
	return layouts, nil
}
