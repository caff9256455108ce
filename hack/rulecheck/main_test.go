package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const rule = `apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
spec:
  groups:
  - name: g
    rules:
    - alert: A
      expr: EXPR
      labels: {severity: warning}
      annotations: {summary: "SUMMARY", runbook_url: "https://example.invalid/#a"}
`

const dashboard = `{"panels": [{"title": "p", "targets": [{"expr": "QUERY"}]}]}`

func check(t *testing.T, expr, summary, query string) error {
	t.Helper()
	dir := t.TempDir()
	r := strings.NewReplacer("EXPR", expr, "SUMMARY", summary).Replace(rule)
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), []byte(r), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "dash.json"), []byte(strings.Replace(dashboard, "QUERY", query, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	return run(filepath.Join(dir, "rules.yaml"), filepath.Join(dir, "dash.json"), filepath.Join(dir, "names.txt"))
}

func TestRulecheck(t *testing.T) {
	good := `sum(rate(x_total[5m])) > 0`
	if err := check(t, good, "{{ $value }}", `rate(y_total[$__rate_interval])`); err != nil {
		t.Fatalf("a good rule and query: %v", err)
	}
	for name, tc := range map[string][3]string{
		"a rule that does not parse":      {`sum(rate(x_total[5m]) > 0`, "s", "y"},
		"an annotation template broken":   {good, "{{ $value ", "y"},
		"a dashboard query that does not": {good, "s", `rate(y_total[`},
	} {
		if err := check(t, tc[0], tc[1], tc[2]); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestRulecheckListsTheMetricsRead(t *testing.T) {
	dir := t.TempDir()
	r := strings.NewReplacer("EXPR", `a_total / on() b_seconds_bucket`, "SUMMARY", "s").Replace(rule)
	_ = os.WriteFile(filepath.Join(dir, "rules.yaml"), []byte(r), 0o600)
	_ = os.WriteFile(filepath.Join(dir, "dash.json"), []byte(strings.Replace(dashboard, "QUERY", `c{namespace=~\"$namespace\"}`, 1)), 0o600)
	if err := run(filepath.Join(dir, "rules.yaml"), filepath.Join(dir, "dash.json"), filepath.Join(dir, "names.txt")); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(filepath.Join(dir, "names.txt"))
	if got := strings.Join(strings.Fields(strings.SplitN(string(raw), "\n", 3)[2]), " "); got != "a_total b_seconds_bucket c" {
		t.Fatalf("names %q", got)
	}
}
