package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/interp"
	"mvdan.cc/sh/v3/syntax"
)

// runShell is sh: -c SCRIPT [NAME ARGS…], a script file, or commands read from stdin.
// Every command the script runs is an applet run in this process.
func runShell(ctx context.Context, std stdio, dir string, args []string) error {
	opts := []interp.RunnerOption{
		interp.StdIO(std.in, std.out, std.err),
		interp.Env(expand.ListEnviron(os.Environ()...)),
		interp.Dir(dir),
		interp.ExecHandlers(func(interp.ExecHandlerFunc) interp.ExecHandlerFunc {
			return func(ctx context.Context, args []string) error {
				hc := interp.HandlerCtx(ctx)
				return runIn(ctx, stdio{in: hc.Stdin, out: hc.Stdout, err: hc.Stderr}, hc.Dir, args)
			}
		}),
	}
	var src io.Reader = std.in
	name := ""
	switch {
	case len(args) > 2 && args[1] == "-c":
		src = strings.NewReader(args[2])
		if len(args) > 3 {
			opts = append(opts, interp.Params(append([]string{"--"}, args[4:]...)...))
		}
	case len(args) > 1:
		f, err := os.Open(args[1])
		if err != nil {
			return err
		}
		defer f.Close()
		src, name = f, args[1]
		opts = append(opts, interp.Params(append([]string{"--"}, args[2:]...)...))
	}
	r, err := interp.New(opts...)
	if err != nil {
		return err
	}
	if src == std.in && name == "" && len(args) == 1 {
		return interactive(ctx, r, std)
	}
	prog, err := syntax.NewParser().Parse(src, name)
	if err != nil {
		return err
	}
	return r.Run(ctx, prog)
}

// interactive runs each statement as it is read, as `kubectl exec -it POD -- sh` expects.
func interactive(ctx context.Context, r *interp.Runner, std stdio) error {
	parser := syntax.NewParser()
	fmt.Fprint(std.err, "$ ")
	var last error
	for stmts, err := range parser.InteractiveSeq(std.in) {
		if err != nil {
			return err
		}
		if parser.Incomplete() {
			fmt.Fprint(std.err, "> ")
			continue
		}
		for _, stmt := range stmts {
			last = r.Run(ctx, stmt)
			if r.Exited() {
				return last
			}
			if _, ok := errors.AsType[interp.ExitStatus](last); !ok && last != nil {
				fmt.Fprintln(std.err, last)
			}
		}
		fmt.Fprint(std.err, "$ ")
	}
	return last
}
