package readme

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

const page = "# x\n\n## Other\n\n```sh\nnot this\n```\n\n## Try it\n\ntext\n\n" +
	"<!-- readme-test: skip: another machine -->\n```sh\nsudo make cluster\n```\n\n" +
	"```yaml\nkind: X\n```\n\n" +
	"```sh\nexport A=1   # a comment\n# only a comment\nkubectl apply \\\n  -f x.yaml   #> created ... configured\n\nkubectl get fl #>  a   b \n```\n\n" +
	"```bash\necho again\n```\n\n## Next\n\n```sh\nnor this\n```\n"

// TestShellBlocksOfOneSection: only the section's shell blocks, in order; a marked block
// is skipped with its reason; YAML is not a command.
func TestShellBlocksOfOneSection(t *testing.T) {
	run, skipped, err := ShellBlocks(page, "Try it")
	if err != nil {
		t.Fatal(err)
	}
	if len(skipped) != 1 || skipped[0].Reason != "another machine" || !slices.Equal(skipped[0].Lines, []string{"sudo make cluster"}) {
		t.Errorf("skipped %+v", skipped)
	}
	if len(run) != 2 || run[1][0] != "echo again" {
		t.Fatalf("blocks %q", run)
	}
	cmds := Commands(run[0])
	want := []Command{
		{Line: "export A=1   # a comment"},
		{Line: "kubectl apply    -f x.yaml", Shows: []string{"created", "configured"}},
		{Line: "kubectl get fl", Shows: []string{"a b"}},
	}
	if len(cmds) != len(want) {
		t.Fatalf("commands %+v, want %+v", cmds, want)
	}
	for i := range want {
		if cmds[i].Line != want[i].Line || !slices.Equal(cmds[i].Shows, want[i].Shows) {
			t.Errorf("command %d: %+v, want %+v", i, cmds[i], want[i])
		}
	}
	if _, _, err := ShellBlocks(page, "Gone"); err == nil {
		t.Error("a missing section was not reported")
	}
}

// TestMissingFragmentsInOrder: fragments must appear, each after the one before.
func TestMissingFragmentsInOrder(t *testing.T) {
	out := Collapse("NAME   HOLDERS\ninvoice-shards   3/3\nreport-generator  1")
	if m := Missing(out, []string{"invoice-shards", "3/3", "report-generator"}); m != "" {
		t.Errorf("missing %q", m)
	}
	if m := Missing(out, []string{"report-generator", "invoice-shards"}); m != "invoice-shards" {
		t.Errorf("out of order: missing %q, want invoice-shards", m)
	}
	if m := Missing(out, []string{"2/3"}); m != "2/3" {
		t.Errorf("missing %q, want 2/3", m)
	}
}

// TestTheReadmeOffersCommandsToRun: the project's README has both sections the real-node
// spec runs, with the install, the samples and a check of what they show, and says why
// it skips what it skips.
func TestTheReadmeOffersCommandsToRun(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var cmds []Command
	for _, section := range []string{"Quickstart", "Try it on real nodes"} {
		run, skipped, err := ShellBlocks(string(raw), section)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range skipped {
			if len(s.Reason) < 20 {
				t.Errorf("%s: a block is skipped for %q: say why", section, s.Reason)
			}
		}
		for _, b := range run {
			cmds = append(cmds, Commands(b)...)
		}
	}
	lines := []string{}
	shows := 0
	for _, c := range cmds {
		lines = append(lines, Collapse(c.Line))
		shows += len(c.Shows)
	}
	for _, want := range []string{"kubectl apply --server-side -f dist/install.yaml", "kubectl apply -k config/samples", "kubectl get fl"} {
		if !slices.Contains(lines, want) {
			t.Errorf("the README's commands %q lack %q", lines, want)
		}
	}
	if shows < 3 {
		t.Errorf("the README's commands say what %d outputs show, want at least 3", shows)
	}
}
