//go:build tools

// Package tools pins kwok in this module, so that kwok builds against the same Kubernetes
// packages as kube and reuses what kube's build compiled (~80 s less on a cold machine).
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
