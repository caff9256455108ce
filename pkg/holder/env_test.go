package holder

import (
	"strings"
	"testing"
)

func TestFromEnv(t *testing.T) {
	t.Setenv("FENCING_LEASE_NAMESPACE", "billing")
	t.Setenv("FENCING_LEASE_NAME", "invoices")
	t.Setenv("FENCING_HOLDER_IDENTITY", "run-1")
	t.Setenv("FENCING_TOKEN", "42")
	c, err := Config{}.FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if c.Namespace != "billing" || c.LeaseName != "invoices" || c.Identity != "run-1" || c.Token != 42 {
		t.Fatalf("got %+v", c)
	}

	// Before the grant the downward API resolves the missing annotation to "".
	t.Setenv("FENCING_TOKEN", "")
	if _, err := (Config{}).FromEnv(); err == nil || !strings.Contains(err.Error(), `FENCING_TOKEN="" is not a granted token`) {
		t.Fatalf("got %v", err)
	}
	t.Setenv("FENCING_TOKEN", "42")
	t.Setenv("FENCING_LEASE_NAME", "")
	if _, err := (Config{}).FromEnv(); err == nil || !strings.Contains(err.Error(), "FENCING_LEASE_NAME is not set") {
		t.Fatalf("got %v", err)
	}
}
