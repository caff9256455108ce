package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"testing"
)

// StartPostgres runs a throwaway PostgreSQL server (initdb and pg_ctl from the Debian
// package) in a temp folder, listening on a free loopback port, and returns a DSN for it.
// The server stops when the test ends. Run as root, it runs as the postgres user: initdb
// refuses root.
func StartPostgres(t testing.TB) string {
	t.Helper()
	return StartPostgresOn(t, "127.0.0.1")
}

// StartPostgresOn is StartPostgres listening on addr, trusting every client that reaches
// it (the real nodes' pods reach it on their network namespace's address).
func StartPostgresOn(t testing.TB, addr string) string {
	t.Helper()
	return StartPostgresServer(t, addr).DSN
}

// Postgres is a running throwaway PostgreSQL server.
type Postgres struct {
	// DSN reaches its database postgres as the trusted user fence.
	DSN string
	// Stop stops it as a crash does (pg_ctl -m immediate); Start starts it again on the
	// same port and data.
	Stop, Start func()
}

// StartPostgresServer is StartPostgresOn with a handle to stop and start the server.
func StartPostgresServer(t testing.TB, addr string) *Postgres {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(bins) == 0 {
		t.Fatal("PostgreSQL is not installed (apt-get install postgresql); .ci/run installs it")
	}
	sort.Strings(bins)
	bin := filepath.Dir(bins[len(bins)-1])

	dir, err := os.MkdirTemp("", "fence-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root needs the postgres user: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	run := func(name string, args ...string) {
		t.Helper()
		cmd := exec.Command(filepath.Join(bin, name), args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		cmd.Env = append(os.Environ(), "LC_ALL=C")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
	}
	data := filepath.Join(dir, "data")
	run("initdb", "-D", data, "-U", "fence", "--auth=trust", "-E", "UTF8", "--no-sync")
	if addr != "127.0.0.1" {
		hba, err := os.OpenFile(filepath.Join(data, "pg_hba.conf"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		_, err = fmt.Fprintln(hba, "host all all 0.0.0.0/0 trust")
		if cerr := hba.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	port := FreePort(t)
	running := false
	pg := &Postgres{DSN: fmt.Sprintf("postgres://fence@%s:%d/postgres?sslmode=disable", addr, port)}
	pg.Start = func() {
		run("pg_ctl", "-D", data, "-w", "-l", filepath.Join(dir, "log"), "-o",
			fmt.Sprintf("-p %d -k %s -c listen_addresses=%s -c fsync=off -c max_connections=50", port, dir, addr), "start")
		running = true
	}
	pg.Stop = func() {
		run("pg_ctl", "-D", data, "-m", "immediate", "stop")
		running = false
	}
	pg.Start()
	t.Cleanup(func() {
		if running {
			pg.Stop()
		}
	})
	return pg
}
