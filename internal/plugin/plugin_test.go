package plugin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/hack/manifest"
	"github.com/fencedlease/fencedlease/internal/plugin"
	"github.com/fencedlease/fencedlease/pkg/holder"
	"github.com/fencedlease/fencedlease/test/testenv"
)

const ns = "billing"

// kubectl runs `kubectl fencedlease args...` in-process with the kubeconfig, as kubectl
// would run the plugin; it returns what it printed and its error.
type kubectl func(args ...string) (string, error)

func setup(t *testing.T) (kubectl, client.Client, *kubernetes.Clientset) {
	run, c, cs, _ := setupAs(t, nil)
	return run, c, cs
}

// setupAs is setup with `kubectl fencedlease` run as a user with exactly rules in the
// namespace (nil: a cluster admin).
func setupAs(t *testing.T, rules []rbacv1.PolicyRule) (kubectl, client.Client, *kubernetes.Clientset, *envtest.Environment) {
	t.Helper()
	env, cfg, c := testenv.StartT(t)
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	op, err := testenv.StartController(cfg, ns, testenv.ControllerOptions{Name: "operator"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = op.Stop() })
	kubeconfig := writeKubeconfig(t, env, c, rules)
	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		cmd := plugin.NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &out})
		cmd.SetArgs(append([]string{"--kubeconfig", kubeconfig, "-n", ns}, args...))
		err := cmd.ExecuteContext(ctx)
		return out.String(), err
	}
	return run, c, kubernetes.NewForConfigOrDie(cfg), env
}

func writeKubeconfig(t *testing.T, env *envtest.Environment, c client.Client, rules []rbacv1.PolicyRule) string {
	t.Helper()
	u := envtest.User{Name: "admin", Groups: []string{"system:masters"}}
	if rules != nil {
		u = envtest.User{Name: "reader"}
		ctx := context.Background()
		if err := c.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "reader"}, Rules: rules}); err != nil {
			t.Fatal(err)
		}
		if err := c.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "reader"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "reader"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "reader"}}}); err != nil {
			t.Fatal(err)
		}
	}
	return testenv.WriteKubeconfig(t, env, u, t.TempDir())
}

// The whole administrator's story: status shows the holder and the queue in grant
// order, suspend holds grants back, revoke cuts the holder off and revokes it (its
// pkg/holder stops before anyone else is granted), resume grants the next in line, and
// history tells it all in order.
func TestPlugin(t *testing.T) {
	kubectl, c, cs := setup(t)
	ctx := context.Background()
	fl := &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "invoices"},
		Spec: fencingv1.FencedLeaseSpec{LeaseDurationSeconds: 3}}
	if err := c.Create(ctx, fl); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"a", "c", "b"} { // created in this order: c waits before b
		if err := c.Create(ctx, testenv.CandidatePod(ns, p, "invoices")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(1100 * time.Millisecond) // creationTimestamp has whole seconds
	}
	get := func() *fencingv1.FencedLease {
		got := &fencingv1.FencedLease{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(fl), got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	testenv.WaitFor(t, 10*time.Second, "a to be granted", func() bool { h := get().Status.Holder; return h != nil && h.PodName == "a" })
	// Granted, not yet renewed: the operator's grant-time write is no renewal.
	var starting plugin.Status
	if out, err := kubectl("status", "invoices", "-o", "json"); err != nil || json.Unmarshal([]byte(out), &starting) != nil ||
		starting.Holder == nil || starting.Holder.Confirmed || starting.Holder.SinceRenewal != nil {
		t.Fatalf("status before the first renewal: %v\n%s", err, out)
	}
	a, err := holder.Start(ctx, holder.Config{Leases: holder.ClientGo(cs.CoordinationV1()), Namespace: ns, LeaseName: "invoices", Identity: "a", Token: 1})
	if err != nil {
		t.Fatal(err)
	}

	// status, as data and as text.
	var st plugin.Status
	testenv.WaitFor(t, 10*time.Second, "status to show a confirmed", func() bool {
		out, err := kubectl("status", "invoices", "-o", "json")
		return err == nil && json.Unmarshal([]byte(out), &st) == nil && st.Holder != nil && st.Holder.Confirmed
	})
	if h := st.Holder; h.Pod != "a" || h.Token != 1 || !h.LeaseHeld || h.TimeLeft == nil || h.TimeLeft.Duration > 3*time.Second || h.TimeLeft.Duration <= 0 {
		t.Fatalf("status holder %+v, want a with token 1, renewed, some of its 3 s left", h)
	}
	if len(st.Waiting) != 2 || st.Waiting[0].Pod != "c" || st.Waiting[1].Pod != "b" || st.Waiting[0].Age.Duration < st.Waiting[1].Age.Duration {
		t.Fatalf("waiting %+v, want c then b (oldest first)", st.Waiting)
	}
	text, err := kubectl("status", "invoices")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Holder:", "a, token 1", "Renewed:", "left of its 3s lease", "Waiting (2, in grant order):"} {
		if !strings.Contains(text, want) {
			t.Errorf("status text lacks %q:\n%s", want, text)
		}
	}
	if strings.Index(text, " c ") > strings.Index(text, " b ") {
		t.Errorf("status text lists b before c:\n%s", text)
	}
	if yml, err := kubectl("status", "invoices", "-o", "yaml"); err != nil || !strings.Contains(yml, "pod: a") {
		t.Errorf("status -o yaml: %v\n%s", err, yml)
	}

	// suspend: the holder keeps its grant; nobody new is granted.
	if out, err := kubectl("suspend", "invoices"); err != nil || !strings.Contains(out, "suspended") {
		t.Fatalf("suspend: %v\n%s", err, out)
	}
	if !get().Spec.Suspend {
		t.Fatal("suspend did not set spec.suspend")
	}

	// revoke: a's renewals are refused at once, and it is revoked when its lease ran out.
	if _, err := kubectl("revoke", "invoices", "--token", "7"); err == nil || !strings.Contains(err.Error(), "not 7") {
		t.Fatalf("revoke --token 7 of token 1's grant: %v", err)
	}
	requested := time.Now()
	out, err := kubectl("revoke", "invoices", "--wait", "--timeout", "30s")
	if err != nil || !strings.Contains(out, "token 1 revoked (RevokeRequested)") {
		t.Fatalf("revoke --wait: %v\n%s", err, out)
	}
	revoked := time.Now()
	select {
	case <-a.Context().Done():
		if !errors.Is(a.Err(), holder.ErrRevoked) {
			t.Fatalf("a's holder ended with %v, want ErrRevoked", a.Err())
		}
	default:
		t.Fatal("a's holder still holds after its revocation")
	}
	rv := get().Status.LastRevocation
	if rv == nil || rv.Token != 1 || rv.Reason != fencingv1.ReasonRevokeRequested {
		t.Fatalf("last revocation %+v", rv)
	}
	t.Logf("revoke --wait returned %v after the request (lease 3 s)", revoked.Sub(requested).Round(time.Millisecond))
	if h := get().Status.Holder; h != nil {
		t.Fatalf("suspended, yet %s was granted", h.PodName)
	}

	// resume: c, the oldest waiting, is granted token 2.
	if out, err := kubectl("resume", "invoices", "-o", "json"); err != nil || !strings.Contains(out, `"kind": "FencedLease"`) {
		t.Fatalf("resume -o json: %v\n%s", err, out)
	}
	testenv.WaitFor(t, 10*time.Second, "c to be granted token 2", func() bool {
		h := get().Status.Holder
		return h != nil && h.PodName == "c" && h.Token == 2
	})

	// history: the whole story, in order.
	var hist plugin.History
	out, err = kubectl("history", "invoices", "-o", "json")
	if err != nil || json.Unmarshal([]byte(out), &hist) != nil {
		t.Fatalf("history -o json: %v\n%s", err, out)
	}
	var story []string
	for _, e := range hist.Entries {
		story = append(story, e.Reason+" "+e.Pod)
	}
	if got, want := strings.Join(story, ", "), "Granted a, RevokeRequested a, Revoked a, Granted c"; got != want {
		t.Fatalf("history %q, want %q", got, want)
	}
	if text, err := kubectl("history", "invoices"); err != nil || !strings.Contains(text, "RevokeRequested") || !strings.HasPrefix(text, "TIME") {
		t.Fatalf("history text: %v\n%s", err, text)
	}
}

// Bad input gets a clear error before anything is written, and completion offers names.
func TestPluginErrorsAndCompletion(t *testing.T) {
	kubectl, c, _ := setup(t)
	ctx := context.Background()
	if err := c.Create(ctx, &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "invoices"}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"status", "nosuch"}, `no FencedLease "nosuch" in namespace "billing"`},
		{[]string{"status", "invoices", "-o", "xml"}, `unknown output format "xml"`},
		{[]string{"revoke", "invoices"}, "has no holder to revoke"},
		{[]string{"suspend"}, "accepts 1 arg"},
	} {
		if _, err := kubectl(tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}
	if got := &(fencingv1.FencedLease{}); c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "invoices"}, got) == nil &&
		got.Annotations[fencingv1.RevokeAnnotation] != "" {
		t.Error("a refused revoke wrote its request")
	}
	out, err := kubectl("__complete", "status", "inv")
	if err != nil || !strings.HasPrefix(out, "invoices\n") {
		t.Fatalf("completion: %v\n%s", err, out)
	}
}

// A reader with what the built-in view role gives (the bundle's viewer-role, which it
// aggregates, and pods and events; no Leases)
// sees status and history; status says it cannot show renewals, and revoke is refused.
func TestPluginAsAViewer(t *testing.T) {
	kubectl, c, _, _ := setupAs(t, append(bundleRules(t, "viewer-role"),
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods", "events"}, Verbs: []string{"get", "list", "watch"}}))
	ctx := context.Background()
	if err := c.Create(ctx, &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "invoices"}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, testenv.CandidatePod(ns, "a", "invoices")); err != nil {
		t.Fatal(err)
	}
	var text string
	testenv.WaitFor(t, 10*time.Second, "status to show a holding", func() bool {
		out, err := kubectl("status", "invoices")
		text = out
		return err == nil && strings.Contains(out, "a, token 1")
	})
	if !strings.Contains(text, "no permission to read Lease billing/invoices") {
		t.Errorf("status as a viewer:\n%s", text)
	}
	if out, err := kubectl("history", "invoices"); err != nil || !strings.Contains(out, "Granted") {
		t.Errorf("history as a viewer: %v\n%s", err, out)
	}
	if _, err := kubectl("revoke", "invoices"); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("revoke as a viewer: %v, want forbidden", err)
	}
}

// An editor (the bundle's editor-role, which the built-in edit role aggregates, with what
// edit gives on pods, events and Leases) may revoke, suspend and resume; a grant that never
// renewed is revoked at once (its startup deadline is 5 minutes by default).
func TestPluginAsAnEditor(t *testing.T) {
	rules := bundleRules(t, "editor-role")
	rules = append(rules,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods", "events"}, Verbs: []string{"get", "list", "watch"}},
		rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "list", "watch", "update"}})
	kubectl, c, _, _ := setupAs(t, rules)
	ctx := context.Background()
	if err := c.Create(ctx, &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "invoices"}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, testenv.CandidatePod(ns, "a", "invoices")); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 10*time.Second, "a to be granted", func() bool {
		out, err := kubectl("status", "invoices")
		return err == nil && strings.Contains(out, "a, token 1")
	})
	for _, args := range [][]string{{"suspend", "invoices"}, {"resume", "invoices"}, {"revoke", "invoices", "--wait", "--timeout", "30s"}} {
		if out, err := kubectl(args...); err != nil {
			t.Fatalf("%v as an editor: %v\n%s", args, err, out)
		}
	}
	// a never renewed (nothing runs it here), so it never ran: revoked at once, well
	// before its startup deadline.
	fl := &fencingv1.FencedLease{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "invoices"}, fl); err != nil {
		t.Fatal(err)
	}
	if rv := fl.Status.LastRevocation; rv == nil || rv.Token != 1 || rv.Reason != fencingv1.ReasonRevokeRequested {
		t.Fatalf("last revocation %+v, want token 1 RevokeRequested", rv)
	}
}

// bundleRules reads the rules of ClusterRole name from config/rbac/user_roles.yaml.
func bundleRules(t *testing.T, name string) []rbacv1.PolicyRule {
	t.Helper()
	return rulesIn(t, "user_roles.yaml", name)
}

// rulesIn reads the rules of ClusterRole name from config/rbac/file.
func rulesIn(t *testing.T, file, name string) []rbacv1.PolicyRule {
	t.Helper()
	objs, err := manifest.Read(filepath.Join(testenv.RepoRoot(), "config", "rbac", file))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() == "ClusterRole" && o.GetName() == name {
			var role rbacv1.ClusterRole
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &role); err != nil {
				t.Fatal(err)
			}
			return role.Rules
		}
	}
	t.Fatalf("no ClusterRole %s in config/rbac/%s", name, file)
	return nil
}

// A holder's service account (the bundle's holder-role: its Lease, nothing else) cannot
// ask to revoke anyone, nor suspend the FencedLease.
func TestPluginAsAHolder(t *testing.T) {
	kubectl, c, _, _ := setupAs(t, rulesIn(t, "holder_role.yaml", "holder-role"))
	ctx := context.Background()
	if err := c.Create(ctx, &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "invoices"}}); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"revoke", "invoices"}, {"suspend", "invoices"}} {
		if _, err := kubectl(args...); err == nil || !strings.Contains(err.Error(), "forbidden") {
			t.Errorf("%v as a holder: %v, want forbidden", args, err)
		}
	}
	fl := &fencingv1.FencedLease{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "invoices"}, fl); err != nil {
		t.Fatal(err)
	}
	if fl.Spec.Suspend || fl.Annotations[fencingv1.RevokeAnnotation] != "" {
		t.Fatalf("a holder changed the FencedLease: %+v", fl)
	}
}
