package realnode

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/test/testenv"
)

// testCutOffFromAPIServer: a holder writing to PostgreSQL through the SQL fence loses
// the API server (its pod's packets to it dropped) but not the database. Under hold, the
// command is stopped; behind the agent, the workload stops writing once the agent's state
// file stops saying Holding or its deadline passed; with pkg/holder, once the Holder's
// context ends or its deadline passed: each before the lease can have ended (the margin
// is measured). The operator grants the next pod after the lease; the fence accepts no write
// of the old token after the new token's first.
func testCutOffFromAPIServer(t *testing.T) {
	server := testenv.StartPostgresOn(t, "198.18.0.1")
	admin, err := sql.Open("pgx", server)
	must(t, err)
	defer admin.Close()
	for _, c := range []struct {
		name     string
		agent    bool
		command  []string
		stopSign string // what the cut-off holder's log says when its work stops
		env      []corev1.EnvVar
	}{
		{"hold", false, []string{"/fencedlease-agent", "hold", "--", "/workload"}, "stopped", nil},
		// Behind the agent the workload checks the state file and its deadline before
		// each write, as docs/getting-started.md tells it to.
		{"agent", true, []string{"/workload"}, "not holding: stopped writing", nil},
		// A Go workload holding its grant with pkg/holder: it writes while the Holder's
		// context lives and its local deadline has not passed.
		{"pkg", false, []string{"/workload"}, "not holding: stopped writing", []corev1.EnvVar{{Name: "HOLDER", Value: "pkg"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ns, lease := "cutoff-"+c.name, "writer"
			const leaseSeconds = 4
			newNamespace(t, ns)
			ctx := context.Background()
			must(t, rc.Client.Create(ctx, &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: lease},
				Spec: fencingv1.FencedLeaseSpec{LeaseDurationSeconds: leaseSeconds, StartupDeadlineSeconds: 60}}))
			grants, err := testenvWatch(ns)
			must(t, err)
			// A database of each case's own: the pods of an earlier case may still write while
			// their namespace goes.
			_, err = admin.ExecContext(ctx, `CREATE DATABASE cutoff_`+c.name)
			must(t, err)
			dsn := strings.Replace(server, "/postgres?", "/cutoff_"+c.name+"?", 1)
			db, err := sql.Open("pgx", dsn)
			must(t, err)
			defer db.Close()
			for _, name := range []string{"writer-1", "writer-2"} {
				pod := workloadPod(ns, name, lease, corev1.Container{Name: "work", Command: c.command,
					Env: append([]corev1.EnvVar{{Name: "LEDGER_DSN", Value: dsn}}, c.env...)})
				pod.Spec.RestartPolicy = corev1.RestartPolicyNever
				if c.agent {
					pod.Annotations = map[string]string{fencingv1.AgentAnnotation: "true"}
				}
				must(t, rc.Client.Create(ctx, pod))
				time.Sleep(50 * time.Millisecond) // writer-1 is the older
			}
			reportedAt(t, ns, "writer-1", "work", "wrote token 1", 90*time.Second)
			renewals := followRenewals(ns, lease, "writer-1")
			must(t, rc.CutFromAPIServer(startedPod(t, ns, "writer-1", "work"), "work"))
			cut := time.Now()
			// When writer-1's work stopped: hold stopped its command; behind the agent or
			// pkg/holder, the workload's check before a write found the grant gone. Read
			// before the revocation deletes the pod.
			stoppedAt := reportedAt(t, ns, "writer-1", "work", c.stopSign, 30*time.Second)
			reportedAt(t, ns, "writer-2", "work", "wrote token 2", 90*time.Second)
			last := <-renewals
			end := last.Add(leaseSeconds * time.Second)
			var lastWrite1, firstWrite2 time.Time
			rows, err := db.QueryContext(ctx, `SELECT token, at FROM writes ORDER BY id`)
			must(t, err)
			tokens := []int64{}
			for rows.Next() {
				var token int64
				var at time.Time
				must(t, rows.Scan(&token, &at))
				if n := len(tokens); n > 0 && token < tokens[n-1] {
					t.Errorf("the fence accepted a write of token %d after one of token %d", token, tokens[n-1])
				}
				tokens = append(tokens, token)
				switch {
				case token == 1:
					lastWrite1 = at
				case token == 2 && firstWrite2.IsZero():
					firstWrite2 = at
				}
			}
			must(t, rows.Err())
			if !lastWrite1.Before(end) {
				t.Errorf("token 1's last accepted write began at %v, after its lease could have ended (%v)", lastWrite1, end)
			}
			// hold kills its command: that must come before the lease end. The other two
			// log when a check before a write first found the grant gone, up to a write
			// period after their deadline (pkg/holder's default: 0.5 s before the lease
			// end on a 4 s lease): what binds them is the last accepted write, above.
			if c.name == "hold" && !stoppedAt.Before(end) {
				t.Errorf("writer-1's work stopped at %v, not before its lease could have ended (%v: last renewal %v + %ds)",
					stoppedAt, end, last, leaseSeconds)
			}
			if !lastWrite1.Before(firstWrite2) {
				t.Errorf("token 1 wrote at %v, after token 2's first write at %v", lastWrite1, firstWrite2)
			}
			measured(fmt.Sprintf("cut off from the API server (%s): before the lease end, work stopped / last accepted write", c.name),
				"%v / %v before (cut %v after the last renewal)", end.Sub(stoppedAt).Round(10*time.Millisecond),
				end.Sub(lastWrite1).Round(10*time.Millisecond), cut.Sub(last).Round(10*time.Millisecond))
			fl := getFencedLease(t, ns, lease)
			if fl.Status.LastRevocation == nil || fl.Status.LastRevocation.PodName != "writer-1" {
				t.Errorf("want writer-1 revoked; status %+v", fl.Status)
			}
			if _, err := grants.Stop(); err != nil {
				t.Errorf("grant oracle: %v", err)
			}
		})
	}
}

// followRenewals follows a Lease while holder holds it and sends, once another holds it
// (or two minutes passed), the last renewTime holder wrote.
func followRenewals(ns, name, holder string) <-chan time.Time {
	out := make(chan time.Time, 1)
	go func() {
		var last time.Time
		deadline := time.Now().Add(2 * time.Minute)
		for time.Now().Before(deadline) {
			l := &coordinationv1.Lease{}
			if rc.Client.Get(context.Background(), clientKey(ns, name), l) == nil {
				if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != holder {
					break
				}
				if l.Spec.RenewTime != nil && l.Spec.RenewTime.After(last) {
					last = l.Spec.RenewTime.Time
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
		out <- last
	}()
	return out
}
