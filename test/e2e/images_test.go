package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fencedlease/fencedlease/test/testenv"
)

// dockerfileStage is what a stage of the Dockerfile puts in its image.
type dockerfileStage struct {
	files      []string
	user       string
	entrypoint []string
}

// readDockerfileStages reads each stage's COPY --from destinations, USER and ENTRYPOINT.
func readDockerfileStages(t *testing.T) map[string]*dockerfileStage {
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	stages := map[string]*dockerfileStage{}
	var cur *dockerfileStage
	for line := range strings.Lines(string(raw)) {
		fields := strings.Fields(line)
		switch {
		case len(fields) == 0:
		case fields[0] == "FROM":
			cur = &dockerfileStage{}
			stages[fields[len(fields)-1]] = cur
		case fields[0] == "COPY" && strings.HasPrefix(fields[1], "--from="):
			cur.files = append(cur.files, fields[len(fields)-1])
		case fields[0] == "USER":
			cur.user = fields[1]
		case fields[0] == "ENTRYPOINT":
			if err := json.Unmarshal([]byte(strings.TrimSpace(strings.TrimPrefix(line, "ENTRYPOINT"))), &cur.entrypoint); err != nil {
				t.Fatalf("ENTRYPOINT %q: %v", line, err)
			}
		}
	}
	return stages
}

// TestImagesMatchTheDockerfile: make images builds, without Docker, the images the
// Dockerfile's stages describe: the same files, user and entrypoint on every platform.
func TestImagesMatchTheDockerfile(t *testing.T) {
	root := testenv.RepoRoot()
	stages := readDockerfileStages(t)
	for stage, image := range map[string]string{"operator": "fencedlease", "agent": "fencedlease-agent"} {
		want := stages[stage]
		if want == nil {
			t.Fatalf("the Dockerfile has no stage %q", stage)
		}
		layout := filepath.Join(root, "bin", "images", image)
		out, err := exec.Command(filepath.Join(root, "bin", "image-tool"), "describe", "-layout", layout).Output()
		if err != nil {
			t.Fatalf("image-tool describe %s: %v (run 'make images'; make test does)", layout, err)
		}
		var descs []struct {
			Platform   string   `json:"platform"`
			User       string   `json:"user"`
			Entrypoint []string `json:"entrypoint"`
			Files      []struct {
				Path string `json:"path"`
				Mode int64  `json:"mode"`
			} `json:"files"`
		}
		if err := json.Unmarshal(out, &descs); err != nil {
			t.Fatal(err)
		}
		if len(descs) == 0 {
			t.Fatalf("%s: no platform", image)
		}
		for _, d := range descs {
			var files []string
			for _, f := range d.Files {
				files = append(files, f.Path)
				if f.Mode&0o111 == 0 {
					t.Errorf("%s %s: %s is not executable (mode %o)", image, d.Platform, f.Path, f.Mode)
				}
			}
			slices.Sort(files)
			wantFiles := slices.Sorted(slices.Values(want.files))
			if !slices.Equal(files, wantFiles) {
				t.Errorf("%s %s: files %v, the Dockerfile's %s stage copies %v", image, d.Platform, files, stage, wantFiles)
			}
			if d.User != want.user {
				t.Errorf("%s %s: user %q, the Dockerfile's %q", image, d.Platform, d.User, want.user)
			}
			if !slices.Equal(d.Entrypoint, want.entrypoint) {
				t.Errorf("%s %s: entrypoint %v, the Dockerfile's %v", image, d.Platform, d.Entrypoint, want.entrypoint)
			}
		}
	}
}
