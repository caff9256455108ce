//go:build tools

// Package tools pins kube-apiserver so `go build` can compile it as a dependency
// (go install refuses modules whose go.mod has replace directives).
package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
