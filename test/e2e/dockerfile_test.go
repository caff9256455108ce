package e2e

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fencedlease/fencedlease/test/testenv"
)

// TestDockerfileCopiesEverythingTheBinariesBuildFrom: no Docker engine here to build the
// image, so check what it needs instead: every package of this module that the image's
// binaries import lies under a folder the build stage copies.
func TestDockerfileCopiesEverythingTheBinariesBuildFrom(t *testing.T) {
	root := testenv.RepoRoot()
	f, err := os.Open(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var copied []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 3 && fields[0] == "COPY" && !strings.HasPrefix(fields[1], "--from") {
			for _, src := range fields[1 : len(fields)-1] {
				copied = append(copied, strings.TrimSuffix(src, "/"))
			}
		}
	}
	const module = "github.com/fencedlease/fencedlease"
	cmd := exec.Command("go", "list", "-deps", "./cmd", "./cmd/invoice-scheduler")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	for pkg := range strings.FieldsSeq(string(out)) {
		dir, ok := strings.CutPrefix(pkg, module+"/")
		if !ok {
			continue
		}
		covered := false
		for _, c := range copied {
			if dir == c || strings.HasPrefix(dir, c+"/") {
				covered = true
			}
		}
		if !covered {
			t.Errorf("the image's binaries import %s, which the Dockerfile does not copy (copied: %v)", dir, copied)
		}
	}
}
