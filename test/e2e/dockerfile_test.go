package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fencedlease/fencedlease/controllers/podwebhook"
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
	cmd := exec.Command("go", "list", "-deps", "./cmd", "./cmd/agent", "./cmd/invoice-scheduler")
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

// TestAgentImage: the image the webhook injects is the Dockerfile's agent target, whose
// one binary is where the injected startupProbe runs it; that binary leaves out the
// operator (no controller-runtime, no controllers, not client-go's typed clients, whose
// scheme links every built-in API type) and is under a third of its size.
func TestAgentImage(t *testing.T) {
	root := testenv.RepoRoot()
	raw, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	stage := ""
	var copies, entrypoint []string
	for line := range strings.Lines(string(raw)) {
		fields := strings.Fields(line)
		switch {
		case len(fields) == 0:
		case fields[0] == "FROM":
			stage = fields[len(fields)-1]
		case stage == "agent" && fields[0] == "COPY":
			copies = append(copies, strings.Join(fields[1:], " "))
		case stage == "agent" && fields[0] == "ENTRYPOINT":
			if err := json.Unmarshal([]byte(strings.TrimSpace(strings.TrimPrefix(line, "ENTRYPOINT"))), &entrypoint); err != nil {
				t.Fatalf("the agent stage's ENTRYPOINT: %v", err)
			}
		}
	}
	want := "--from=build /out/fencedlease-agent " + podwebhook.AgentBinary
	if len(copies) != 1 || copies[0] != want {
		t.Errorf("the agent stage copies %q, want only %q", copies, want)
	}
	if len(entrypoint) != 1 || entrypoint[0] != podwebhook.AgentBinary {
		t.Errorf("the agent stage's ENTRYPOINT is %q, want [%s] (the startupProbe runs it)", entrypoint, podwebhook.AgentBinary)
	}

	list := exec.Command("go", "list", "-deps", "./cmd/agent")
	list.Dir = root
	out, err := list.Output()
	if err != nil {
		t.Fatal(err)
	}
	for pkg := range strings.FieldsSeq(string(out)) {
		if strings.HasPrefix(pkg, "sigs.k8s.io/controller-runtime") || strings.HasPrefix(pkg, "github.com/fencedlease/fencedlease/controllers") ||
			pkg == "k8s.io/client-go/kubernetes/scheme" {
			t.Errorf("the agent links %s, which belongs to the operator", pkg)
		}
	}

	// Built as the Dockerfile builds them.
	dir := t.TempDir()
	size := func(name, pkg string) int64 {
		bin := filepath.Join(dir, name)
		if out, err := testenv.GoBuild("-ldflags=-s -w", "-o", bin, pkg).CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, out)
		}
		fi, err := os.Stat(bin)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	agent, operator := size("fencedlease-agent", "./cmd/agent"), size("fencedlease", "./cmd")
	t.Logf("fencedlease-agent %.1f MB, fencedlease %.1f MB (%.0f %%)", float64(agent)/1e6, float64(operator)/1e6, 100*float64(agent)/float64(operator))
	if agent*3 > operator {
		t.Errorf("fencedlease-agent is %d bytes, over a third of the operator's %d", agent, operator)
	}
}
