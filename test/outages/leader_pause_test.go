package outages

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/test/testenv"
)

// TestPausedLeaderWritesNothingAfterItsLease pauses the leading manager (SIGSTOP) for
// longer than its leader lease while it is busy granting and revoking, lets the standby
// take over, resumes it, and reads the API server's audit log: the resumed manager sent
// no write after it resumed, and campaigns again as a standby instead of exiting. (Without the guard, 80 writes in the first 0.6 s after it
// resumed, status updates among them that the API server accepted.)
func TestPausedLeaderWritesNothingAfterItsLease(t *testing.T) {
	dir := t.TempDir()
	env, err := testenv.New()
	if err != nil {
		t.Fatal(err)
	}
	auditLog := filepath.Join(dir, "audit.log")
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte("apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: Metadata\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env.ControlPlane.GetAPIServer().Configure().Set("audit-policy-file", policy).Set("audit-log-path", auditLog)
	_, c := testenv.StartEnvT(t, env)
	bin := testenv.BuildOperator(t, dir)
	a := testenv.StartManager(t, env, bin, dir, "manager-a", testenv.ReplicaFlags...)
	testenv.WaitFor(t, 30*time.Second, "manager-a to lead", func() bool { return a.Leading() })
	b := testenv.StartManager(t, env, bin, dir, "manager-b", testenv.ReplicaFlags...)

	// Churn: pods that never renew, each granted and revoked at the 1 s startup deadline.
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ha"}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	fl := &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: "ha", Name: "churn"},
		Spec: fencingv1.FencedLeaseSpec{LeaseDurationSeconds: 1, StartupDeadlineSeconds: 1}}
	if err := c.Create(ctx, fl); err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		if err := c.Create(ctx, testenv.CandidatePod("ha", fmt.Sprintf("p%02d", i), "churn")); err != nil {
			t.Fatal(err)
		}
	}
	testenv.WaitFor(t, 30*time.Second, "a few grants by manager-a", func() bool { return transitions(c, fl) >= 3 })

	if err := a.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	before := transitions(c, fl)
	testenv.WaitFor(t, 30*time.Second, "manager-b to lead and grant", func() bool { return b.Leading() && transitions(c, fl) > before })
	time.Sleep(time.Until(stopped.Add(5 * time.Second))) // paused well past its 3 s lease
	if err := a.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	// It finds its leadership lost and campaigns again in the same process, as a standby
	// now: it must still write nothing.
	testenv.WaitFor(t, 30*time.Second, "the resumed ex-leader to find its leadership lost", func() bool {
		return strings.Contains(a.Stderr.String(), "leadership lost; every write of its term refused")
	})
	time.Sleep(3 * time.Second) // a standby again: watch it write nothing
	if a.Exited() {
		t.Fatalf("the resumed ex-leader exited instead of campaigning again:\n%s", a.Stderr.String())
	}
	if a.Leading() || !b.Leading() {
		t.Fatalf("after the resume: manager-a leading %v, manager-b leading %v; want b alone", a.Leading(), b.Leading())
	}
	after := transitions(c, fl)

	writes := auditedWrites(t, auditLog, "manager-a")
	var early, late []string
	for _, w := range writes {
		switch {
		case w.at.Before(stopped):
			early = append(early, w.what)
		case !w.at.Before(resumed):
			late = append(late, w.what)
		}
	}
	t.Logf("manager-a: %d writes before the pause; %d after it resumed; %d refusals logged; grants by manager-b meanwhile: %d",
		len(early), len(late), strings.Count(a.Stderr.String(), "leadership not certain"), after-before)
	if len(early) == 0 {
		t.Fatal("manager-a made no writes before the pause: the scenario did not run")
	}
	if len(late) > 0 {
		t.Fatalf("the resumed ex-leader wrote after its lease had passed:\n%s", strings.Join(late, "\n"))
	}
	if strings.Count(a.Stderr.String(), "leadership not certain") == 0 {
		t.Fatal("the resumed ex-leader never tried to act: the scenario did not test the guard")
	}
	if after <= before {
		t.Fatal("manager-b made no grant while manager-a was paused")
	}
}

func transitions(c client.Client, fl *fencingv1.FencedLease) int64 {
	got := &fencingv1.FencedLease{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(fl), got); err != nil {
		return -1
	}
	return got.Status.Transitions
}

type write struct {
	at   time.Time
	what string
}

// auditedWrites lists user's writes from the audit log, leaving out its leader-election
// Lease (trying to renew is not a decision) and events.
func auditedWrites(t *testing.T, path, user string) []write {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []write
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e struct {
			Stage string `json:"stage"`
			Verb  string `json:"verb"`
			User  struct {
				Username string `json:"username"`
			} `json:"user"`
			ObjectRef struct {
				Resource, Namespace, Name, Subresource string
			} `json:"objectRef"`
			ResponseStatus struct {
				Code int `json:"code"`
			} `json:"responseStatus"`
			Received time.Time `json:"requestReceivedTimestamp"`
		}
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.Stage != "ResponseComplete" || e.User.Username != user {
			continue
		}
		switch e.Verb {
		case "create", "update", "patch", "delete":
		default:
			continue
		}
		ref := e.ObjectRef
		if ref.Resource == "events" || (ref.Resource == "leases" && ref.Name == "fencedlease-operator") {
			continue
		}
		out = append(out, write{at: e.Received, what: fmt.Sprintf("%s %s %s/%s/%s (%d) at %s",
			e.Verb, ref.Resource, ref.Namespace, ref.Name, ref.Subresource, e.ResponseStatus.Code, e.Received.Format(time.RFC3339Nano))})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
