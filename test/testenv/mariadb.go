package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// MariaDB is a throwaway MariaDB server (Debian's mariadb-server; .ci/run installs it) in
// a temp folder on a loopback port, without grant tables (any user may connect). Pause,
// Resume and Restart act on the process; its data survives a Restart.
type MariaDB struct {
	t    testing.TB
	dir  string
	port int
	cred *syscall.Credential
	cmd  *exec.Cmd
}

// StartMariaDB starts one; it stops when the test ends. DSN names its database "fence".
func StartMariaDB(t testing.TB) *MariaDB {
	t.Helper()
	if _, err := exec.LookPath("mariadb-install-db"); err != nil {
		t.Fatal("MariaDB is not installed (apt-get install mariadb-server); .ci/run installs it")
	}
	dir, err := os.MkdirTemp("", "fence-mariadb-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	m := &MariaDB{t: t, dir: dir, port: FreePort(t)}
	if os.Geteuid() == 0 { // mariadbd refuses to run as root
		u, err := user.Lookup("mysql")
		if err != nil {
			t.Fatalf("running as root needs the mysql user: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		m.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	install := exec.Command("mariadb-install-db", "--no-defaults", "--datadir="+filepath.Join(dir, "data"),
		"--auth-root-authentication-method=normal", "--skip-test-db")
	install.SysProcAttr = &syscall.SysProcAttr{Credential: m.cred}
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	m.start()
	t.Cleanup(m.kill)
	return m
}

// DSN is a go-sql-driver/mysql DSN for database "fence" (create it with CreateDatabase).
func (m *MariaDB) DSN(db string) string {
	return fmt.Sprintf("root@tcp(127.0.0.1:%d)/%s?timeout=5s", m.port, db)
}

func (m *MariaDB) start() {
	m.t.Helper()
	m.cmd = exec.Command("mariadbd", "--no-defaults", "--datadir="+filepath.Join(m.dir, "data"),
		"--socket="+filepath.Join(m.dir, "sock"), "--pid-file="+filepath.Join(m.dir, "pid"),
		"--port="+strconv.Itoa(m.port), "--bind-address=127.0.0.1", "--skip-grant-tables", "--skip-name-resolve",
		"--innodb-buffer-pool-size=32M", "--log-error="+filepath.Join(m.dir, "error.log"))
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: m.cred}
	if err := m.cmd.Start(); err != nil {
		m.t.Fatal(err)
	}
}

// Pause stops the process (SIGSTOP).
func (m *MariaDB) Pause() { _ = m.cmd.Process.Signal(syscall.SIGSTOP) }

// Resume continues a paused process.
func (m *MariaDB) Resume() { _ = m.cmd.Process.Signal(syscall.SIGCONT) }

// Restart kills the process (a crash: InnoDB recovers committed transactions) and starts
// it again on the same data.
func (m *MariaDB) Restart() {
	m.t.Helper()
	m.kill()
	time.Sleep(200 * time.Millisecond)
	m.start()
}

func (m *MariaDB) kill() {
	_ = m.cmd.Process.Signal(syscall.SIGCONT)
	_ = m.cmd.Process.Kill()
	_, _ = m.cmd.Process.Wait()
}
