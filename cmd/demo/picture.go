package main

import (
	"fmt"
	"html"
	"regexp"
	"strconv"
	"strings"
)

// picture draws act 1 of the timeline as an SVG: a lane for the operator and one per
// pod, each pod's grant as a bar from its first line as holder to its exit, the freeze
// over the paused holder, and a mark for each grant, revocation and write. It reads the
// timeline's own lines, so the picture is what the run recorded.
func picture(entries []entry, lease int32) string {
	lanes := append([]string{"operator"}, workers...)
	var (
		grant   = regexp.MustCompile(`^granted token (\d+) to (\S+)`)
		revoke  = regexp.MustCompile(`^revoked (\S+) \(token (\d+)\)`)
		holding = regexp.MustCompile(`^holding token (\d+)`)
		wrote   = regexp.MustCompile(`created with token (\d+)`)
		exists  = regexp.MustCompile(`already exists; nothing charged twice \(token (\d+)\)`)
		stale   = regexp.MustCompile(`^REJECTED by the ledger.*offered (\d+)`)
		signal  = regexp.MustCompile(`^(SIGSTOP|SIGCONT) ([a-z0-9-]+)`)
	)
	t0, t1 := -1.0, 0.0
	for _, e := range entries {
		if e.who == "operator" && grant.MatchString(e.text) && t0 < 0 {
			t0 = e.at - 0.5
		}
		t1 = e.at
	}
	if t0 < 0 {
		t0 = 0
	}
	t1 += 0.5
	const left, right, top, laneGap = 130.0, 900.0, 70.0, 62.0
	x := func(at float64) float64 { return left + (at-t0)/(t1-t0)*(right-left) }
	y := func(who string) float64 {
		for i, l := range lanes {
			if l == who {
				return top + float64(i)*laneGap
			}
		}
		return -1
	}
	colors := map[string]string{"1": "#3b6fb6", "2": "#2e8b57", "3": "#8a4fb0"}
	var b strings.Builder
	height := top + float64(len(lanes))*laneGap + 30
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="940" height="%.0f" viewBox="0 0 940 %.0f" font-family="sans-serif" font-size="12">`+"\n", height, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="#ffffff"/>`+"\n")
	fmt.Fprintf(&b, `<text x="10" y="22" font-size="15" font-weight="bold">make demo, act 1: one FencedLease, lease %d s, three candidate pods</text>`+"\n", lease)
	fmt.Fprintf(&b, `<text x="10" y="42" fill="#555">recorded by the demo's own timeline (seconds since it began)</text>`+"\n")
	for _, l := range lanes {
		fmt.Fprintf(&b, `<text x="10" y="%.1f" font-weight="bold">%s</text>`+"\n", y(l)+4, l)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", left, y(l), right, y(l))
	}
	axis := top + float64(len(lanes))*laneGap - 20
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#999"/>`+"\n", left, axis, right, axis)
	for s := float64(int(t0) + 1); s < t1; s++ {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" fill="#777" text-anchor="middle" font-size="10">%ss</text>`+"\n", x(s), axis+14, strconv.Itoa(int(s)))
	}
	// Grants as bars: from the pod's first line as holder to its exit.
	since := map[string]float64{}
	tokenOf := map[string]string{}
	stopped := map[string]float64{}
	for _, e := range entries {
		if m := signal.FindStringSubmatch(e.text); m != nil && e.who == "demo" && y(m[2]) > 0 {
			switch m[1] {
			case "SIGSTOP":
				stopped[m[2]] = e.at
			case "SIGCONT":
				from := stopped[m[2]]
				fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="26" fill="#999" opacity="0.35"/>`+"\n", x(from), y(m[2])-13, x(e.at)-x(from))
				fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" fill="#444" font-size="11">frozen (SIGSTOP): still believes it holds token 1</text>`+"\n", x(from)+4, y(m[2])-17)
			}
		}
		if y(e.who) < 0 || e.at < t0 {
			continue
		}
		if m := holding.FindStringSubmatch(e.text); m != nil {
			since[e.who], tokenOf[e.who] = e.at, m[1]
		}
		if strings.HasPrefix(e.text, "exited with code") {
			if from, ok := since[e.who]; ok {
				fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="14" rx="3" fill="%s" opacity="0.8"/>`+"\n",
					x(from), y(e.who)-7, x(e.at)-x(from), colors[tokenOf[e.who]])
				fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" fill="#fff" font-size="10">token %s</text>`+"\n", x(from)+4, y(e.who)+4, tokenOf[e.who])
				delete(since, e.who)
			}
		}
	}
	mark := func(at float64, lane, color, label string, below bool) {
		dy := -12.0
		if below {
			dy = 22
		}
		fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="5" fill="%s"/>`+"\n", x(at), y(lane), color)
		// Near the right edge a label ends at its mark instead of starting there.
		anchor, lx := "start", x(at)+6
		if x(at) > (left+right)/2+100 {
			anchor, lx = "end", x(at)-6
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" fill="%s" font-size="11" text-anchor="%s">%s</text>`+"\n", lx, y(lane)+dy, color, anchor, html.EscapeString(label))
	}
	for _, e := range entries {
		if e.at < t0 {
			continue
		}
		switch {
		case e.who == "operator" && grant.MatchString(e.text):
			m := grant.FindStringSubmatch(e.text)
			mark(e.at, "operator", "#222", "grant "+m[1], false)
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#222" stroke-dasharray="3,3"/>`+"\n", x(e.at), y("operator"), x(e.at), y(m[2]))
		case e.who == "operator" && revoke.MatchString(e.text):
			m := revoke.FindStringSubmatch(e.text)
			mark(e.at, "operator", "#c0392b", "revoke "+m[2]+" (lease ran out)", true)
		case wrote.MatchString(e.text) && y(e.who) > 0:
			mark(e.at, e.who, "#2e8b57", "writes the run, token "+wrote.FindStringSubmatch(e.text)[1]+": accepted", true)
		case exists.MatchString(e.text) && y(e.who) > 0:
			mark(e.at, e.who, "#8a4fb0", "token "+exists.FindStringSubmatch(e.text)[1]+": already written, nothing twice", true)
		case stale.MatchString(e.text) && y(e.who) > 0:
			mark(e.at, e.who, "#c0392b", "late write with token "+stale.FindStringSubmatch(e.text)[1]+": REFUSED by the ledger", true)
		}
	}
	b.WriteString("</svg>\n")
	return b.String()
}
