//go:build tools

// Package tools pins the etcd server so `go build` can compile it as a dependency.
package tools

import _ "go.etcd.io/etcd/server/v3"
