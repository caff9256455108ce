package realnode

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/fencedlease/fencedlease/test/testenv"
)

// previousRelease is the commit an upgrade starts from and a rollback returns to: the
// last one that landed before the Lease annotation cut-off-reason, the PodCannotRun
// reason and the operator's node watch. Move it forward when a release is cut.
const previousRelease = "b4992dc103c08680684bcae709a9d1f1f145c489"

// previousTag is the tag the cluster's registry serves the previous release's images under.
const previousTag = "previous"

// buildPrevious makes dir/previous the previous release: fencedlease and
// fencedlease-agent (OCI layouts), install.yaml. Built once per commit into bin/ and
// kept there: a release does not change.
func buildPrevious(dir string) error {
	cached := filepath.Join(testenv.RepoRoot(), "bin", "previous", previousRelease+"-"+previousTag)
	if _, err := os.Stat(filepath.Join(cached, "install.yaml")); err != nil {
		building := cached + ".building"
		if err := os.RemoveAll(building); err != nil {
			return err
		}
		if err := buildPreviousInto(building, dir); err != nil {
			return err
		}
		if err := os.Rename(building, cached); err != nil {
			return err
		}
	}
	return os.Symlink(cached, filepath.Join(dir, "previous"))
}

// buildPreviousInto builds the previous release's images from its source (git archive,
// no worktree, unpacked under work) with its own Makefile, and writes them and its bundle
// with its images retagged into out.
func buildPreviousInto(out, work string) error {
	root := testenv.RepoRoot()
	src := filepath.Join(work, "previous-src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return err
	}
	defer os.RemoveAll(src)
	if exec.Command("git", "-C", root, "cat-file", "-e", previousRelease+"^{commit}").Run() != nil {
		// A shallow clone: fetch that one commit from where this clone came from.
		if out, err := exec.Command("git", "-C", root, "fetch", "--quiet", "--depth=1", "origin", previousRelease).CombinedOutput(); err != nil {
			return fmt.Errorf("the previous release %s is not in this clone, and fetching it failed: %v: %s", previousRelease, err, out)
		}
	}
	archive := exec.Command("git", "-C", root, "archive", previousRelease)
	untar := exec.Command("tar", "-x", "-C", src)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		return err
	}
	untar.Stdin = pipe
	var stderr bytes.Buffer
	archive.Stderr = &stderr
	if err := untar.Start(); err != nil {
		return err
	}
	if err := archive.Run(); err != nil {
		return fmt.Errorf("git archive %s (the previous release must be in this clone's history): %v: %s", previousRelease, err, stderr.String())
	}
	if err := untar.Wait(); err != nil {
		return fmt.Errorf("untar the previous release: %v", err)
	}
	build := exec.Command("make", "-C", src, "images", "IMAGE_PLATFORMS=linux/"+runtime.GOARCH,
		"IMAGE_VERSION="+previousTag, "IMAGE_REVISION="+previousRelease, "IMAGE_CREATED=1970-01-01T00:00:00Z")
	if b, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("make images of the previous release: %v\n%s", err, b)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for _, name := range []string{"fencedlease", "fencedlease-agent"} {
		if err := os.Rename(filepath.Join(src, "bin", "images", name), filepath.Join(out, name)); err != nil {
			return err
		}
	}
	bundle, err := os.ReadFile(filepath.Join(src, "dist", "install.yaml"))
	if err != nil {
		return err
	}
	retagged := strings.NewReplacer("image: fencedlease:dev", "image: fencedlease:"+previousTag,
		"value: fencedlease-agent:dev", "value: fencedlease-agent:"+previousTag).Replace(string(bundle))
	if strings.Count(retagged, ":"+previousTag) != 2 {
		return fmt.Errorf("the previous bundle names its images differently: retag it by hand")
	}
	return os.WriteFile(filepath.Join(out, "install.yaml"), []byte(retagged), 0o644)
}

// previousLayouts are the previous release's images for the cluster's registry.
func previousLayouts(bin string) map[string]string {
	return map[string]string{
		"fencedlease:" + previousTag:       filepath.Join(bin, "previous", "fencedlease"),
		"fencedlease-agent:" + previousTag: filepath.Join(bin, "previous", "fencedlease-agent"),
	}
}
