package realnode

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fencedlease/fencedlease/test/readme"
	"github.com/fencedlease/fencedlease/test/testenv"
)

// readmeSections are the README's sections a newcomer copies commands from; testReadme
// runs their shell blocks.
var readmeSections = []string{"Quickstart", "Try it on real nodes"}

// testReadme runs the shell blocks of the README's Quickstart and "Try it on real nodes"
// as written, in order, in one bash on the machine (outside the cluster's namespace, as a
// user's shell is), from a folder laid out as the repository: config/ and dist/ as they
// are, and bin/cluster.kubeconfig naming this cluster, where make cluster writes it. A
// block after <!-- readme-test: skip: REASON --> is skipped and logged with its reason
// (make cluster itself: this cluster is the one it starts). A command fails the spec when
// it exits non-zero, or when its output lacks what its `#>` comment says it shows (the
// fragments between " ... ", in order, spaces collapsed). The samples the commands applied
// are then checked (checkSamples) and removed.
func testReadme(t *testing.T) {
	root := testenv.RepoRoot()
	raw, err := os.ReadFile(filepath.Join(root, "README.md"))
	must(t, err)
	var cmds []readme.Command
	for _, section := range readmeSections {
		blocks, skipped, err := readme.ShellBlocks(string(raw), section)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range skipped {
			t.Logf("README %q: skipped a block (%s): %s", section, s.Reason, strings.Join(s.Lines, "; "))
		}
		for _, b := range blocks {
			cmds = append(cmds, readme.Commands(b)...)
		}
	}
	if len(cmds) < 4 {
		t.Fatalf("the README's sections %v hold %d commands to run, want the install, the samples and the checks", readmeSections, len(cmds))
	}

	home := t.TempDir()
	for _, d := range []string{"config", "dist"} {
		must(t, os.Symlink(filepath.Join(root, d), filepath.Join(home, d)))
	}
	must(t, os.MkdirAll(filepath.Join(home, "bin"), 0o755))
	kubeconfig, err := os.ReadFile(rc.HostKubeconfig)
	must(t, err)
	must(t, os.WriteFile(filepath.Join(home, "bin", "cluster.kubeconfig"), kubeconfig, 0o600))

	const ns = "default"
	failures := watchPodFailures(t, ns)
	printStateOnFailure(t, ns)
	t.Cleanup(func() {
		if out, err := kubectl("delete", "-n", ns, "-k", filepath.Join(root, "config", "samples"), "--wait=false"); err != nil {
			t.Logf("removing the samples: %v\n%s", err, out)
		}
	})
	ran := runReadme(t, home, cmds)
	applied, ok := ran["kubectl apply -k config/samples"]
	if !ok {
		t.Fatal("the README's commands never ran kubectl apply -k config/samples")
	}
	checkSamples(t, ns, applied, failures)
}

// runReadme runs the commands in one bash on the machine, in home, and returns when each
// began (by its text, spaces collapsed). It stops at the first that fails.
func runReadme(t *testing.T, home string, cmds []readme.Command) map[string]time.Time {
	var script strings.Builder
	for i, c := range cmds {
		fmt.Fprintf(&script, "echo '::cmd %d'\n%s\nrc=$?; echo \"::rc %d $rc\"; [ $rc -eq 0 ] || exit $rc\n", i, c.Line, i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	machine := fmt.Sprintf("/proc/%d/ns/net", os.Getppid())
	cmd := exec.CommandContext(ctx, "nsenter", "--net="+machine, "--", "bash", "--noprofile", "--norc", "-o", "pipefail", "-c", script.String())
	cmd.Dir = home
	// A user's shell: this PATH (kubectl), no KUBECONFIG until the README exports one.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home}
	out, err := cmd.StdoutPipe()
	must(t, err)
	cmd.Stderr = cmd.Stdout
	must(t, cmd.Start())
	began := map[string]time.Time{}
	outputs := make([]strings.Builder, len(cmds))
	rcs := map[int]int{}
	cur := -1
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "::cmd "):
			cur, _ = strconv.Atoi(strings.TrimPrefix(line, "::cmd "))
			began[readme.Collapse(cmds[cur].Line)] = time.Now()
		case strings.HasPrefix(line, "::rc "):
			f := strings.Fields(line)
			i, _ := strconv.Atoi(f[1])
			rcs[i], _ = strconv.Atoi(f[2])
		case cur >= 0:
			outputs[cur].WriteString(line + "\n")
		}
	}
	waitErr := cmd.Wait()
	for i, c := range cmds {
		rc, ran := rcs[i]
		got := outputs[i].String()
		t.Logf("$ %s\n%s", c.Line, got)
		if !ran {
			t.Fatalf("README command %q did not finish (%v); its output:\n%s", c.Line, waitErr, got)
		}
		if rc != 0 {
			t.Fatalf("README command %q exited %d; its output:\n%s", c.Line, rc, got)
		}
		if missing := readme.Missing(readme.Collapse(got), c.Shows); missing != "" {
			t.Fatalf("README command %q: its output no longer shows %q (the README says it shows %q); it printed:\n%s", c.Line, missing, c.Shows, got)
		}
	}
	return began
}
