package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/google/go-containerregistry/pkg/registry"
)

// runServe is the registry of the real-node tests and of make cluster: in memory, on the
// address given, holding each NAME=LAYOUT as NAME:dev (and NAME:TAG with NAME:TAG=LAYOUT).
// It prints "ready" once every image is in, and serves until it is signalled.
func runServe(args []string) error {
	fs := flags("serve")
	addr := fs.String("addr", "127.0.0.1:0", "address to listen on")
	_ = fs.Parse(args)
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: registry.New(registry.Logger(discard()))}
	go func() { _ = srv.Serve(ln) }()
	host := ln.Addr().String()
	for _, arg := range fs.Args() {
		ref, dir, ok := strings.Cut(arg, "=")
		if !ok {
			return fmt.Errorf("%q: want NAME[:TAG]=LAYOUT", arg)
		}
		if !strings.Contains(ref, ":") {
			ref += ":dev"
		}
		digest, err := push(dir, host+"/"+ref, true)
		if err != nil {
			return fmt.Errorf("%s: %w", ref, err)
		}
		fmt.Printf("%s/%s@%s\n", host, ref, digest)
	}
	fmt.Printf("ready %s\n", host)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	return srv.Close()
}
