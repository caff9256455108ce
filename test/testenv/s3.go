package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// S3 is a throwaway S3-compatible server on a loopback port: versitygw (built from Go
// modules by make envtest) serving a directory with its POSIX backend, which evaluates
// If-Match and If-None-Match on PUT under a per-object lock. Pause, Resume and Restart act
// on the process; the objects, on disk, survive a Restart.
type S3 struct {
	*serverProcess
	port int
}

// S3AccessKey and S3SecretKey are the root credentials of every test S3 server.
const (
	S3AccessKey = "fencedlease-test"
	S3SecretKey = "fencedlease-test-secret"
)

// StartS3 starts one; it stops when the test ends. Buckets are the directories of its
// root: the test makes its own. An object's metadata (its ETag among it) is kept in
// extended attributes of its file, set before the file is linked in, so a GET returns a
// body with the ETag of the same write; with sidecar it is kept in a file of its own,
// written apart from the body, and a GET racing a PUT can return the old body with the new
// ETag (seen here) — a server the S3 fence must not be fooled by.
func StartS3(t testing.TB, sidecar bool) *S3 {
	t.Helper()
	assets, err := AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, sub := range []string{"root", "meta"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s := &S3{port: FreePort(t)}
	s.serverProcess = startProcess(t, filepath.Join(dir, "versitygw.log"), func() *exec.Cmd {
		args := []string{"--access", S3AccessKey, "--secret", S3SecretKey, "--port", s.Endpoint(), "posix"}
		if sidecar {
			args = append(args, "--sidecar", filepath.Join(dir, "meta"))
		}
		return exec.Command(filepath.Join(assets, "versitygw"), append(args, filepath.Join(dir, "root"))...)
	})
	return s
}

// Endpoint is host:port, without a scheme (plain HTTP).
func (s *S3) Endpoint() string { return fmt.Sprintf("127.0.0.1:%d", s.port) }
