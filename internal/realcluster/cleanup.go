package realcluster

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// StateDir holds everything the run writes: the control plane's and nodes' state, logs,
// the pods' volumes and network namespaces' mounts. It has a fixed place, so the clean-up
// of a run that was killed finds it.
func StateDir() string { return filepath.Join(os.TempDir(), "fencedlease-realnode") }

// cgroupHierarchies are the cgroup v1 hierarchies each node's cgroupRoot is made in.
func cgroupHierarchies() []string {
	entries, _ := os.ReadDir("/sys/fs/cgroup")
	var dirs []string
	for _, e := range entries {
		if e.IsDir() {
			dirs = append(dirs, filepath.Join("/sys/fs/cgroup", e.Name()))
		}
	}
	return dirs
}

// Cleanup removes what a run made, whether it ended or was killed: it thaws and kills
// the containers (by their nodes' cgroups) and every process in the namespace (kubelets,
// containerds, shims, servers), unmounts what is mounted under StateDir, removes the nodes'
// cgroups, the namespace and StateDir, and the kubelets' log links. Safe to run twice.
func Cleanup() error {
	var errs []error
	for range 3 {
		thaw()
		killed := killCgroupProcs()
		killed += killNetnsProcs()
		if killed == 0 {
			break
		}
		time.Sleep(300 * time.Millisecond)
	}
	if err := unmountUnder(StateDir()); err != nil {
		errs = append(errs, err)
	}
	if err := removeCgroups(); err != nil {
		errs = append(errs, err)
	}
	if _, err := os.Stat("/run/netns/" + Netns); err == nil {
		if out, err := exec.Command("ip", "netns", "del", Netns).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("ip netns del: %v: %s", err, out))
		}
	}
	removeLogLinks()
	if err := os.RemoveAll(StateDir()); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func nodeCgroups(hierarchy string) []string {
	dirs, _ := filepath.Glob(filepath.Join(hierarchy, "fencedlease-*"))
	return dirs
}

// thaw resumes every frozen container: a frozen process does not die of SIGKILL.
func thaw() {
	for _, root := range nodeCgroups("/sys/fs/cgroup/freezer") {
		_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				_ = os.WriteFile(filepath.Join(path, "freezer.state"), []byte("THAWED"), 0)
			}
			return nil
		})
	}
}

func killCgroupProcs() int {
	killed := 0
	for _, h := range cgroupHierarchies() {
		for _, root := range nodeCgroups(h) {
			_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
					return nil
				}
				killed += killPids(path)
				return nil
			})
		}
	}
	return killed
}

func killPids(file string) int {
	raw, _ := os.ReadFile(file)
	n := 0
	for f := range strings.FieldsSeq(string(raw)) {
		if pid, err := strconv.Atoi(f); err == nil && pid != os.Getpid() {
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				n++
			}
		}
	}
	return n
}

func killNetnsProcs() int {
	if _, err := os.Stat("/run/netns/" + Netns); err != nil {
		return 0
	}
	out, _ := exec.Command("ip", "netns", "pids", Netns).Output()
	n := 0
	for f := range strings.FieldsSeq(string(out)) {
		pid, err := strconv.Atoi(f)
		if err != nil || pid == os.Getpid() || pid == os.Getppid() {
			continue
		}
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			n++
		}
	}
	return n
}

// unmountUnder detaches every mount below dir, deepest first.
func unmountUnder(dir string) error {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	defer f.Close()
	var points []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && (fields[4] == dir || strings.HasPrefix(fields[4], dir+"/")) {
			points = append(points, fields[4])
		}
	}
	slices.SortFunc(points, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	var errs []error
	for _, p := range points {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// removeCgroups removes the nodes' cgroups, deepest first (rmdir of an empty cgroup).
func removeCgroups() error {
	var errs []error
	for _, h := range cgroupHierarchies() {
		for _, root := range nodeCgroups(h) {
			var dirs []string
			_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
				if err == nil && d.IsDir() {
					dirs = append(dirs, path)
				}
				return nil
			})
			for _, d := range slices.Backward(dirs) {
				var err error
				for range 20 {
					if err = syscall.Rmdir(d); err == nil || errors.Is(err, syscall.ENOENT) {
						err = nil
						break
					}
					time.Sleep(100 * time.Millisecond)
				}
				if err != nil {
					errs = append(errs, fmt.Errorf("rmdir %s: %w", d, err))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// removeLogLinks removes the kubelets' links in /var/log/containers that point into
// StateDir: the one path outside it a kubelet writes on its own.
func removeLogLinks() {
	links, _ := filepath.Glob("/var/log/containers/*.log")
	for _, l := range links {
		if target, err := os.Readlink(l); err == nil && strings.HasPrefix(target, StateDir()+"/") {
			_ = os.Remove(l)
		}
	}
}
