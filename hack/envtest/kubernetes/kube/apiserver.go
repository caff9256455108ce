//go:build !noapiserver

package main

import (
	"github.com/spf13/cobra"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func init() {
	commands["kube-apiserver"] = func() *cobra.Command { return apiserver.NewAPIServerCommand() }
}
