// Package docs holds the user documentation; its test keeps the pages' links and the
// README's length honest.
package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

var (
	link    = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)\)`)
	heading = regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*$`)
	fence   = regexp.MustCompile("(?ms)^```.*?^```")
)

// pages are the Markdown files users read: the README, docs/, the chart's README and
// examples; the CHANGELOG and docs/notes are history and keep the paths of their day.
func pages(t *testing.T, root string) []string {
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") && rel != "." || rel == "bin" || rel == filepath.Join("docs", "notes") || d.Name() == "node_modules" {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".md") && d.Name() != "CHANGELOG.md" {
			out = append(out, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// slug is the anchor GitHub gives a heading: lower case, letters, digits, '-' and '_'
// kept, spaces to '-', the rest dropped.
func slug(h string) string {
	h = strings.ReplaceAll(h, "`", "")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, m := range heading.FindAllStringSubmatch(fence.ReplaceAllString(text, ""), -1) {
		s := slug(m[1])
		if n := seen[s]; n > 0 {
			out[s+"-"+strconv.Itoa(n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

// TestLinksResolve: every relative link in the user docs names a file that exists, and
// every #anchor a heading of its page.
func TestLinksResolve(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, page := range pages(t, root) {
		raw, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		text := string(raw)
		rel, _ := filepath.Rel(root, page)
		for _, m := range link.FindAllStringSubmatch(fence.ReplaceAllString(text, ""), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			file, anchor, _ := strings.Cut(target, "#")
			dest := page
			if file != "" {
				dest = filepath.Join(filepath.Dir(page), file)
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s: link %s: no such file", rel, target)
					continue
				}
			}
			if anchor == "" || !strings.HasSuffix(dest, ".md") {
				continue
			}
			destText := text
			if dest != page {
				b, _ := os.ReadFile(dest)
				destText = string(b)
			}
			if !anchors(destText)[anchor] {
				t.Errorf("%s: link %s: no heading with that anchor", rel, target)
			}
		}
	}
	if checked < 20 {
		t.Errorf("checked %d links: the pattern no longer finds them", checked)
	}
}

// TestReadmeIsALandingPage: the README stays short; the rest lives in docs/.
func TestReadmeIsALandingPage(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(raw), "\n"); n > 250 {
		t.Errorf("README.md has %d lines, want at most 250: move the detail to docs/", n)
	}
}
