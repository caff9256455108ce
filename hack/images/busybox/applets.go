package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"mvdan.cc/sh/v3/interp"
)

// at is path as the shell sees it: relative to its working directory.
func at(dir, path string) string {
	if filepath.IsAbs(path) {
		return path
	}
	return filepath.Join(dir, path)
}

func cat(_ context.Context, std stdio, dir string, args []string) error {
	if len(args) == 1 {
		_, err := io.Copy(std.out, std.in)
		return err
	}
	failed := false
	for _, p := range args[1:] {
		f, err := os.Open(at(dir, p))
		if err != nil {
			fmt.Fprintf(std.err, "cat: %v\n", err)
			failed = true
			continue
		}
		_, err = io.Copy(std.out, f)
		f.Close()
		if err != nil {
			return err
		}
	}
	if failed {
		return interp.ExitStatus(1)
	}
	return nil
}

func echo(_ context.Context, std stdio, _ string, args []string) error {
	args = args[1:]
	newline := true
	if len(args) > 0 && args[0] == "-n" {
		newline, args = false, args[1:]
	}
	out := strings.Join(args, " ")
	if newline {
		out += "\n"
	}
	_, err := io.WriteString(std.out, out)
	return err
}

func date(_ context.Context, std stdio, _ string, args []string) error {
	now := time.Now().UTC()
	if len(args) > 1 && strings.HasPrefix(args[len(args)-1], "+%s") {
		_, err := fmt.Fprintln(std.out, now.Unix())
		return err
	}
	_, err := fmt.Fprintln(std.out, now.Format(time.RFC3339))
	return err
}

func env(_ context.Context, std stdio, _ string, _ []string) error {
	for _, kv := range os.Environ() {
		fmt.Fprintln(std.out, kv)
	}
	return nil
}

func hostname(_ context.Context, std stdio, _ string, _ []string) error {
	h, err := os.Hostname()
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(std.out, h)
	return err
}

func trueApplet(context.Context, stdio, string, []string) error  { return nil }
func falseApplet(context.Context, stdio, string, []string) error { return interp.ExitStatus(1) }

func ls(_ context.Context, std stdio, dir string, args []string) error {
	paths := args[1:]
	if len(paths) == 0 {
		paths = []string{"."}
	}
	for _, p := range paths {
		entries, err := os.ReadDir(at(dir, p))
		if err != nil {
			fmt.Fprintf(std.err, "ls: %v\n", err)
			return interp.ExitStatus(1)
		}
		for _, e := range entries {
			fmt.Fprintln(std.out, e.Name())
		}
	}
	return nil
}

func mkdir(_ context.Context, std stdio, dir string, args []string) error {
	parents := false
	for _, p := range args[1:] {
		if p == "-p" {
			parents = true
			continue
		}
		var err error
		if parents {
			err = os.MkdirAll(at(dir, p), 0o755)
		} else {
			err = os.Mkdir(at(dir, p), 0o755)
		}
		if err != nil {
			fmt.Fprintf(std.err, "mkdir: %v\n", err)
			return interp.ExitStatus(1)
		}
	}
	return nil
}

// sleep takes seconds, fractions too (sleep 0.2), and ends early when the shell is stopped.
func sleep(ctx context.Context, std stdio, _ string, args []string) error {
	if len(args) != 2 {
		fmt.Fprintln(std.err, "usage: sleep SECONDS")
		return interp.ExitStatus(1)
	}
	s, err := strconv.ParseFloat(args[1], 64)
	if err != nil || s < 0 {
		fmt.Fprintf(std.err, "sleep: invalid number %q\n", args[1])
		return interp.ExitStatus(1)
	}
	t := time.NewTimer(time.Duration(s * float64(time.Second)))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// grep PATTERN [FILE…] with -q (quiet), -v (invert), -c (count), -i (ignore case), -F
// (fixed string) and -E (the pattern is Go's regexp syntax in any case).
func grep(_ context.Context, std stdio, dir string, args []string) error {
	var quiet, invert, count, fold, fixed bool
	rest := args[1:]
	for len(rest) > 0 && strings.HasPrefix(rest[0], "-") && len(rest[0]) > 1 {
		for _, f := range rest[0][1:] {
			switch f {
			case 'q':
				quiet = true
			case 'v':
				invert = true
			case 'c':
				count = true
			case 'i':
				fold = true
			case 'F':
				fixed = true
			case 'E':
			default:
				fmt.Fprintf(std.err, "grep: unknown option -%c\n", f)
				return interp.ExitStatus(2)
			}
		}
		rest = rest[1:]
	}
	if len(rest) == 0 {
		fmt.Fprintln(std.err, "usage: grep [-qvciFE] PATTERN [FILE…]")
		return interp.ExitStatus(2)
	}
	pattern := rest[0]
	if fixed {
		pattern = regexp.QuoteMeta(pattern)
	}
	if fold {
		pattern = "(?i)" + pattern
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		fmt.Fprintf(std.err, "grep: %v\n", err)
		return interp.ExitStatus(2)
	}
	inputs := []io.Reader{std.in}
	if len(rest) > 1 {
		inputs = nil
		for _, p := range rest[1:] {
			f, err := os.Open(at(dir, p))
			if err != nil {
				fmt.Fprintf(std.err, "grep: %v\n", err)
				return interp.ExitStatus(2)
			}
			defer f.Close()
			inputs = append(inputs, f)
		}
	}
	matched := 0
	for _, in := range inputs {
		sc := bufio.NewScanner(in)
		for sc.Scan() {
			if re.MatchString(sc.Text()) == invert {
				continue
			}
			matched++
			if quiet {
				return nil
			}
			if !count {
				fmt.Fprintln(std.out, sc.Text())
			}
		}
	}
	if count {
		fmt.Fprintln(std.out, matched)
	}
	if matched == 0 {
		return interp.ExitStatus(1)
	}
	return nil
}
