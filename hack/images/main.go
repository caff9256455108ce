// Command images builds the Dockerfile's two images without a Docker engine, pushes them,
// describes them, and serves them from a registry on loopback for the real-node tests.
//
//	images build -bin DIR -out DIR [-version V -revision R -created RFC3339 -source URL]
//	images push -layout DIR -ref REF [-insecure]
//	images describe -layout DIR
//	images serve -addr HOST:PORT NAME=LAYOUT...
//	images pack -out DIR -entrypoint PATH FILE...
//
// build reads DIR/<os>_<arch>/ for each platform's static binaries (what the Dockerfile's
// build stage produces) and writes one OCI image layout per image under -out, each an
// index of every platform found. The same binaries and flags give the same digests.
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "build":
		err = runBuild(os.Args[2:])
	case "push":
		err = runPush(os.Args[2:])
	case "describe":
		err = runDescribe(os.Args[2:])
	case "serve":
		err = runServe(os.Args[2:])
	case "pack":
		err = runPack(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "images %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: images build|push|describe|serve|pack [flags]; images CMD -h for its flags")
	os.Exit(2)
}

func flags(name string) *flag.FlagSet {
	return flag.NewFlagSet("images "+name, flag.ExitOnError)
}
