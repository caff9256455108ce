package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/fencedlease/fencedlease/test/testenv"
)

// TestEveryOperatorFlagIsInTheReference: each flag `fencedlease --help` lists, but the
// logger's (zap's own, documented by controller-runtime), is named in docs/reference.md.
func TestEveryOperatorFlagIsInTheReference(t *testing.T) {
	bin := testenv.BuildOperator(t, t.TempDir())
	out, _ := exec.Command(bin, "--help").CombinedOutput() // --help exits 2 with the usage
	flags := regexp.MustCompile(`(?m)^\s+-([a-z0-9-]+)`).FindAllStringSubmatch(string(out), -1)
	if len(flags) < 10 {
		t.Fatalf("fencedlease --help listed %d flags:\n%s", len(flags), out)
	}
	reference, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "docs", "reference.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range flags {
		if strings.HasPrefix(f[1], "zap-") || f[1] == "kubeconfig" {
			continue
		}
		if !strings.Contains(string(reference), "`--"+f[1]) {
			t.Errorf("docs/reference.md does not name the flag --%s", f[1])
		}
	}
}
