// Command busybox is make cluster's stand-in for the busybox image the samples name
// (config/samples): nothing can be pulled from outside here, so the cluster's registry
// serves this as docker.io's busybox:1.36. It is one binary linked under each of its
// applets' names: a POSIX shell (mvdan.cc/sh) and the few commands the samples run.
// It is not busybox; an applet it lacks says so and names the ones it has.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"mvdan.cc/sh/v3/interp"
)

func main() {
	args := os.Args
	if filepath.Base(args[0]) == "busybox" && len(args) > 1 {
		args = args[1:]
	}
	io := stdio{in: os.Stdin, out: os.Stdout, err: os.Stderr}
	err := runApplet(context.Background(), io, args)
	if status, ok := errors.AsType[interp.ExitStatus](err); ok {
		os.Exit(int(status))
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", filepath.Base(args[0]), err)
		os.Exit(1)
	}
}

// stdio is where an applet reads and writes: the process's, or the shell's redirections.
type stdio struct {
	in       io.Reader
	out, err io.Writer
}

// applet runs one command; dir is the shell's working directory.
type applet func(ctx context.Context, io stdio, dir string, args []string) error

// applets is every name the image links to this binary (Names, for the image's /bin).
var applets map[string]applet

func init() {
	applets = map[string]applet{
		"sh": runShell, "cat": cat, "date": date, "echo": echo, "env": env, "false": falseApplet,
		"grep": grep, "hostname": hostname, "httpd": httpd, "ls": ls, "mkdir": mkdir, "sleep": sleep,
		"true": trueApplet,
	}
}

// Names are the applets, sorted.
func Names() []string {
	names := make([]string, 0, len(applets))
	for n := range applets {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func runApplet(ctx context.Context, io stdio, args []string) error {
	dir, _ := os.Getwd()
	return runIn(ctx, io, dir, args)
}

func runIn(ctx context.Context, io stdio, dir string, args []string) error {
	a, ok := applets[filepath.Base(args[0])]
	if !ok {
		fmt.Fprintf(io.err, "%s: not found (this is make cluster's busybox stand-in; it has %v)\n", args[0], Names())
		return interp.ExitStatus(127)
	}
	return a(ctx, io, dir, args)
}
