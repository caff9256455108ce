package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
)

// TestStandinLinksEveryApplet: the stand-in's /bin holds its binary and a link to it for
// each applet, so `sh -c` and `kubectl exec POD -- cat …` find them, and /tmp is writable.
func TestStandinLinksEveryApplet(t *testing.T) {
	out := buildInto(t, fakeBinaries(t, "linux_amd64"))
	for _, s := range Standins {
		descs, err := describe(filepath.Join(out, s.Name))
		if err != nil {
			t.Fatal(err)
		}
		files := map[string]File{}
		for _, f := range descs[0].Files {
			files[f.Path] = f
		}
		if f := files["/bin/"+s.Name]; f.Mode != 0o755 || f.Size == 0 {
			t.Errorf("%s: /bin/%s is %+v", s.Name, s.Name, f)
		}
		if f, ok := files["/tmp/"]; !ok || f.Mode != 0o1777 {
			t.Errorf("%s: /tmp/ is %+v", s.Name, f)
		}
		if !slices.Contains(s.Applets, "sh") {
			t.Errorf("%s: no sh among %v", s.Name, s.Applets)
		}
		for _, a := range s.Applets {
			if f := files["/bin/"+a]; f.Link != s.Name {
				t.Errorf("%s: /bin/%s is %+v, want a link to %s", s.Name, a, f, s.Name)
			}
		}
	}
}

// TestSamplesNameOnlyImagesMakeClusterServes: every image in config/samples is one of the
// project's (NAME:dev) or a stand-in's NAME:TAG, so the samples pull on make cluster.
func TestSamplesNameOnlyImagesMakeClusterServes(t *testing.T) {
	served := map[string]bool{}
	for _, img := range Images {
		served[img.Name+":dev"] = true
	}
	for _, s := range Standins {
		served[s.Name+":"+s.Tag] = true
	}
	files, err := filepath.Glob("../../config/samples/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no samples: %v", err)
	}
	image := regexp.MustCompile(`(?m)^\s*image:\s*"?([^"\s#]+)`)
	seen := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range image.FindAllStringSubmatch(string(raw), -1) {
			seen++
			if !served[m[1]] {
				t.Errorf("%s: image %s is not served by make cluster (it serves %v)", filepath.Base(f), m[1], served)
			}
		}
	}
	if seen == 0 {
		t.Error("no image: lines found in config/samples")
	}
}
