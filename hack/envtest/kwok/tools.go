//go:build tools

// Package tools pins kwok so `go build` can compile its command as a dependency.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
