// Package readme reads the shell blocks a README section offers a newcomer, so a test can
// run them as written: which blocks run and which are marked to be skipped (with
// <!-- readme-test: skip: REASON --> on the line before the block), each block's
// commands (continued lines joined, comment lines dropped), and what a command's `#>`
// comment says its output shows (fragments between " ... ", in order).
package readme

import (
	"fmt"
	"regexp"
	"strings"
)

// Command is one command of a README block, with what its `#>` comment says its
// output shows.
type Command struct {
	Line  string
	Shows []string
}

type Skipped struct {
	Reason string
	Lines  []string
}

// shellLanguages are the info strings of blocks a reader would paste into a shell: each
// is run or marked to be skipped, never passed over.
var shellLanguages = map[string]bool{"sh": true, "bash": true, "shell": true, "console": true, "": true}

var skipMark = regexp.MustCompile(`^<!--\s*readme-test:\s*skip:\s*(.+?)\s*-->$`)

// ShellBlocks are the ```sh blocks of the README section titled title, and those marked
// to be skipped.
func ShellBlocks(readme, title string) (run [][]string, skipped []Skipped, err error) {
	lines := strings.Split(readme, "\n")
	start := -1
	for i, l := range lines {
		if l == "## "+title {
			start = i + 1
			break
		}
	}
	if start < 0 {
		return nil, nil, fmt.Errorf("the README has no section %q", title)
	}
	skip := ""
	for i := start; i < len(lines) && !strings.HasPrefix(lines[i], "## "); i++ {
		l := lines[i]
		if m := skipMark.FindStringSubmatch(l); m != nil {
			skip = m[1]
			continue
		}
		lang, fenced := strings.CutPrefix(l, "```")
		if !fenced {
			if strings.TrimSpace(l) != "" {
				skip = ""
			}
			continue
		}
		var block []string
		for i++; i < len(lines) && lines[i] != "```"; i++ {
			block = append(block, lines[i])
		}
		switch {
		case !shellLanguages[strings.TrimSpace(lang)]:
			// YAML and the like: read, not run.
		case skip != "":
			skipped = append(skipped, Skipped{skip, block})
		default:
			run = append(run, block)
		}
		skip = ""
	}
	return run, skipped, nil
}

// Commands joins continued lines and drops comment lines.
func Commands(block []string) []Command {
	var out []Command
	cur := ""
	for _, l := range block {
		if strings.HasSuffix(l, "\\") {
			cur += strings.TrimSuffix(l, "\\") + " "
			continue
		}
		l = cur + l
		cur = ""
		if t := strings.TrimSpace(l); t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		c := Command{Line: l}
		if i := strings.Index(l, " #> "); i >= 0 {
			c.Line = strings.TrimRight(l[:i], " ")
			for f := range strings.SplitSeq(l[i+4:], " ... ") {
				c.Shows = append(c.Shows, Collapse(f))
			}
		}
		out = append(out, c)
	}
	return out
}

var spaces = regexp.MustCompile(`\s+`)

// Collapse is s with each run of white space one space, trimmed.
func Collapse(s string) string { return strings.TrimSpace(spaces.ReplaceAllString(s, " ")) }

// Missing is the first fragment not found in out after the ones before it.
func Missing(out string, shows []string) string {
	for _, f := range shows {
		i := strings.Index(out, f)
		if i < 0 {
			return f
		}
		out = out[i+len(f):]
	}
	return ""
}
