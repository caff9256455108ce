package outages

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/pkg/holder"
	"github.com/fencedlease/fencedlease/test/testenv"
)

// TestWarmStandbyAcrossAPIServerRestarts restarts the API server three times within two
// minutes under the real binary, run by a kubelet-like supervisor that would restart it
// with a back-off if it exited. It does not: each outage outlasts its renew deadline, so
// it loses leadership and campaigns again in the same process. A Warm holder keeps its
// grant through it all (its lease outlasts each outage; every new term gives it a whole
// lease), its Warm standby keeps waiting on its watch — no grant to it, no two holders —
// and once the holder releases, the standby is granted token 2 and its work begins.
func TestWarmStandbyAcrossAPIServerRestarts(t *testing.T) {
	dir := t.TempDir()
	env, err := testenv.New()
	if err != nil {
		t.Fatal(err)
	}
	testenv.Restartable(env, t.TempDir())
	cfg, c := testenv.StartEnvT(t, env)
	apiServer := env.ControlPlane.GetAPIServer()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const ns = "warm-outages"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	grants, err := testenv.WatchGrants(ctx, c, ns)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "invoices"},
		Spec: fencingv1.FencedLeaseSpec{LeaseDurationSeconds: 20, StartupDeadlineSeconds: 60, Standby: fencingv1.StandbyWarm}}); err != nil {
		t.Fatal(err)
	}
	pods := map[string]*corev1.Pod{}
	for _, name := range []string{"a", "b"} {
		p := testenv.WarmCandidatePod(ns, name, "invoices")
		if err := c.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		pods[name] = p
	}

	// The supervisor would restart an exited operator after 2 s, doubling to 16 s (a
	// kubelet's CrashLoopBackOff shape, 10 s doubling to 5 min, scaled down to fit a test).
	op := testenv.Supervise(t, env, testenv.BuildOperator(t, dir), dir, "op",
		testenv.Backoff{First: 2 * time.Second, Max: 16 * time.Second, Reset: 2 * time.Minute}, testenv.ReplicaFlags...)
	exits := func() int { return len(op.Exits()) }

	cs := kubernetes.NewForConfigOrDie(cfg)
	waiter := func(pod string) holder.Config {
		return holder.Config{Leases: holder.ClientGo(cs.CoordinationV1()), Namespace: ns, LeaseName: "invoices",
			Identity: pod, UID: pods[pod].UID}
	}
	a, err := holder.StartWhenGranted(ctx, waiter("a"))
	if err != nil {
		t.Fatal(err)
	}
	type started struct {
		h  *holder.Holder
		at time.Time
	}
	bStarted := make(chan started, 1)
	go func() {
		if h, err := holder.StartWhenGranted(ctx, waiter("b")); err == nil {
			bStarted <- started{h, time.Now()}
		}
	}()

	for i := 1; i <= 3; i++ {
		time.Sleep(12 * time.Second) // three restarts within two minutes
		if err := apiServer.Stop(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Second) // longer than the operator's renew deadline (2 s)
		if err := apiServer.Start(); err != nil {
			t.Fatal(err)
		}
		t.Logf("API-server restart %d done; operator exits so far: %d", i, exits())
	}
	if n := exits(); n > 0 {
		t.Fatalf("the operator exited %d times across the restarts, want none (it campaigns again instead)", n)
	}
	select {
	case s := <-bStarted:
		t.Fatalf("the standby started working (token %d) while the holder held its grant", s.h.Token())
	default:
	}
	if err := a.Err(); err != nil {
		t.Fatalf("the holder lost its grant across the restarts: %v", err)
	}

	released := time.Now()
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-bStarted:
		t.Logf("holder released → standby working with token %d in %v (operator exits: %d)",
			s.h.Token(), s.at.Sub(released).Round(time.Millisecond), exits())
		if s.h.Token() != 2 {
			t.Fatalf("standby token %d, want 2", s.h.Token())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the standby was not granted within 60 s of the release (operator exits: %d)", exits())
	}
	fl := &fencingv1.FencedLease{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "invoices"}, fl); err != nil {
		t.Fatal(err)
	}
	if fl.Status.Revocations != 0 {
		t.Fatalf("%d revocations, want none: %+v", fl.Status.Revocations, fl.Status.LastRevocation)
	}
	if tokens, err := grants.Stop(); err != nil {
		t.Fatalf("the grant oracle: %v (tokens %v)", err, tokens)
	}
}
