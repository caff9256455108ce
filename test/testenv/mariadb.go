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
)

// MariaDB is a throwaway MariaDB server (Debian's mariadb-server; .ci/run installs it) in
// a temp folder on a loopback port, without grant tables (any user may connect). Pause,
// Resume and Restart act on the process; its data survives a Restart (a crash: InnoDB
// recovers the committed transactions).
type MariaDB struct {
	*serverProcess
	port int
}

// StartMariaDB starts one; it stops when the test ends. DSN names a database on it.
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
	var cred *syscall.Credential
	if os.Geteuid() == 0 { // mariadbd refuses to run as root
		u, err := user.Lookup("mysql")
		if err != nil {
			t.Fatalf("running as root needs the mysql user: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	install := exec.Command("mariadb-install-db", "--no-defaults", "--datadir="+filepath.Join(dir, "data"),
		"--auth-root-authentication-method=normal", "--skip-test-db")
	install.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	m := &MariaDB{port: FreePort(t)}
	m.serverProcess = startProcess(t, filepath.Join(dir, "stderr.log"), func() *exec.Cmd {
		cmd := exec.Command("mariadbd", "--no-defaults", "--datadir="+filepath.Join(dir, "data"),
			"--socket="+filepath.Join(dir, "sock"), "--pid-file="+filepath.Join(dir, "pid"),
			"--port="+strconv.Itoa(m.port), "--bind-address=127.0.0.1", "--skip-grant-tables", "--skip-name-resolve",
			"--innodb-buffer-pool-size=32M", "--log-error="+filepath.Join(dir, "error.log"))
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		return cmd
	})
	return m
}

// DSN is a go-sql-driver/mysql DSN for database db ("" for none).
func (m *MariaDB) DSN(db string) string {
	return fmt.Sprintf("root@tcp(127.0.0.1:%d)/%s?timeout=5s&readTimeout=5s&writeTimeout=5s", m.port, db)
}
