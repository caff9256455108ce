package fencedlease

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// The protocol's step IDs (G1, X3, …) are defined once, in doc.go, and cited by the code,
// the docs and the tests. This keeps the citations honest: an ID cited anywhere must be
// defined, and every defined ID must be cited by at least one test — the test that would
// fail if its invariant broke. The changelog and docs/notes/ are history, citing IDs as
// they were then, and are not read.
func TestProtocolIDsAreDefinedAndTested(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	defined := map[string]bool{}
	for _, m := range definition.FindAllStringSubmatch(string(doc), -1) {
		defined[m[1]] = true
	}
	if len(defined) < 30 {
		t.Fatalf("found %d definitions in doc.go: the pattern no longer matches how it defines them", len(defined))
	}
	testedBy := map[string][]string{}
	var undefined []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") || rel == "bin" || rel == filepath.Join("docs", "notes") || rel == filepath.Join("hack", "tools") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, ".md") || d.Name() == "CHANGELOG.md" {
			return nil
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(raw), "\n") {
			for _, id := range citations(line) {
				if !defined[id] {
					undefined = append(undefined, rel+":"+strconv.Itoa(i+1)+": "+id+" in: "+strings.TrimSpace(line))
				}
				if strings.HasSuffix(path, "_test.go") && rel != filepath.Join("controllers", "fencedlease", "protocol_ids_test.go") {
					testedBy[id] = append(testedBy[id], rel)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(undefined) > 0 {
		t.Errorf("protocol IDs cited but not defined in doc.go:\n%s", strings.Join(undefined, "\n"))
	}
	var untested []string
	for id := range defined {
		if len(testedBy[id]) == 0 {
			untested = append(untested, id)
		}
	}
	slices.Sort(untested)
	if len(untested) > 0 {
		t.Errorf("protocol IDs defined in doc.go that no test cites (cite the ID where a test checks its invariant): %v", untested)
	}
}

// Every step doc.go defines names the action of the generated histories (history_test.go)
// that carries it out or brings it about: an action's name begins with the IDs it
// covers. A step no action names is one the model never explores.
func TestEveryProtocolStepHasAModelAction(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	w := &historyWorld{}
	named := map[string]bool{}
	for _, group := range []map[string]func(*rapid.T){w.actions(), w.podActions(), w.userActions()} {
		for name := range group {
			for _, id := range citations(name) {
				named[id] = true
			}
		}
	}
	var missing []string
	for _, m := range definition.FindAllStringSubmatch(string(doc), -1) {
		if !named[m[1]] {
			missing = append(missing, m[1])
		}
	}
	if len(missing) > 0 {
		t.Errorf("protocol steps no action of the generated histories names: %v", missing)
	}
}

// definition is a step's definition in doc.go: "//\tX3. …".
var definition = regexp.MustCompile(`(?m)^//\t([GRLXCQHADNPW][0-9]+)\. `)

// citations are the IDs a line cites: a step letter and its number, alone ("X3",
// "X3's", "X1–X6"), not part of a longer word or number ("H264", "A10b", "sha256:A1").
func citations(line string) []string {
	var out []string
	for _, at := range stepID.FindAllStringIndex(line, -1) {
		before, after := byte(' '), byte(' ')
		if at[0] > 0 {
			before = line[at[0]-1]
		}
		if at[1] < len(line) {
			after = line[at[1]]
		}
		if wordByte(before) || before == '-' || before == ':' || wordByte(after) {
			continue
		}
		out = append(out, line[at[0]:at[1]])
	}
	return out
}

var stepID = regexp.MustCompile(`[GRLXCQHADNPW][0-9]{1,2}`)

func wordByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '_'
}
