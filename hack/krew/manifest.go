package main

import "fmt"

// Plugin is a krew plugin manifest (krew.googlecontainertools.github.com/v1alpha2).
type Plugin struct {
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	Metadata   Metadata   `json:"metadata"`
	Spec       PluginSpec `json:"spec"`
}

type Metadata struct {
	Name string `json:"name"`
}

type PluginSpec struct {
	Version          string     `json:"version"`
	Homepage         string     `json:"homepage"`
	ShortDescription string     `json:"shortDescription"`
	Description      string     `json:"description"`
	Platforms        []Platform `json:"platforms"`
}

type Platform struct {
	Selector Selector `json:"selector"`
	URI      string   `json:"uri"`
	Sha256   string   `json:"sha256"`
	Files    []FileOp `json:"files"`
	Bin      string   `json:"bin"`
}

type Selector struct {
	MatchLabels map[string]string `json:"matchLabels"`
}

type FileOp struct {
	From string `json:"from"`
	To   string `json:"to"`
}

func manifest(version string) *Plugin {
	return &Plugin{
		APIVersion: "krew.googlecontainertools.github.com/v1alpha2",
		Kind:       "Plugin",
		Metadata:   Metadata{Name: "fencedlease"},
		Spec: PluginSpec{
			Version:          version,
			Homepage:         "https://github.com/fencedlease/fencedlease",
			ShortDescription: "Inspect and operate FencedLeases: holder, queue, history, revoke",
			Description: `Shows who holds a FencedLease's grant, how long it has left and who waits in
what order (status), its grants, releases and revocations as a timeline (history),
and lets an administrator revoke the current holder safely, or suspend and resume
grants. Needs the fencedlease operator in the cluster.`,
		},
	}
}

func platform(goos, goarch, version, archive, sum string) Platform {
	bin := binName(goos)
	files := []FileOp{{From: bin, To: "."}}
	if goos != "windows" {
		files = append(files, FileOp{From: "kubectl_complete-fencedlease", To: "."})
	}
	return Platform{
		Selector: Selector{MatchLabels: map[string]string{"os": goos, "arch": goarch}},
		URI:      fmt.Sprintf("%s/%s/%s", releases, version, archive),
		Sha256:   sum,
		Files:    files,
		Bin:      bin,
	}
}
