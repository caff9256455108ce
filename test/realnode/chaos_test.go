package realnode

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/test/chaos"
)

var chaosRounds = flag.Int("realnode.chaos.rounds", 0, "How many times the real-node chaos class injects each of its faults (make chaos: CHAOS_ROUNDS); 0, make test's, skips it: each fault has its own spec there.")

const (
	chaosNamespace = "chaos"
	chaosLease     = "ledger"
	chaosLeaseLen  = 5 * time.Second
	chaosReplicas  = 3
)

// testChaos is the real-node class of make chaos (skipped in make test, where each fault
// has its own spec): a Warm
// Deployment of three replicas holding one FencedLease with pkg/holder and writing to
// PostgreSQL through the SQL fence (one pod in two a zombie that ignores its Holder once
// granted), on the two real nodes; each round strikes the holder of the moment with every
// fault of holderFaults. The history — pod states, the Lease's renewals, revocations,
// every write attempted and the fenced table — is judged by test/chaos's checker: never
// two holders, tokens only rising, no write accepted after a newer token's, nothing
// accepted lost, and per fault the grant moved within a lease + chaos.HolderMargin of the
// holder's last renewal (or, for a kubelet stop, kept).
func testChaos(t *testing.T) {
	if *chaosRounds == 0 {
		t.Skip("-realnode.chaos.rounds=0")
	}
	ns := chaosNamespace
	newNamespace(t, ns)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	must(t, rc.Client.Create(ctx, &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: chaosLease},
		Spec: fencingv1.FencedLeaseSpec{LeaseDurationSeconds: int32(chaosLeaseLen.Seconds()), StartupDeadlineSeconds: 60, Standby: fencingv1.StandbyWarm}}))
	grants, err := testenvWatch(ns)
	must(t, err)
	rec := chaos.Record(ctx, clientset(t), rc.Client, ns, chaosLease)
	dsn, db := fencedDatabase(t, "chaos")
	writeLogs := filepath.Join(rc.Dir(), "chaos-writes")
	must(t, os.MkdirAll(writeLogs, 0o777))
	must(t, os.Chmod(writeLogs, 0o777))
	must(t, rc.Client.Create(ctx, chaosDeployment(ns, dsn, writeLogs)))

	killed := &killedPods{names: map[string]bool{}}
	var faults []chaos.Fault
	struck := chaosSettled(t, ns)
	for round := range *chaosRounds {
		for _, f := range holderFaults {
			fault := f.inject(t, ns, struck, killed)
			fault.Kind, fault.Grant, fault.Token = f.name, f.fate, holderToken(struck)
			faults = append(faults, fault)
			t.Logf("round %d: %s of %s (token %d) on %s: %s → %s", round+1, f.name, struck.Name, fault.Token, struck.Spec.NodeName,
				fault.Start.Format("15:04:05.000"), fault.End.Format("15:04:05.000"))
			struck = chaosSettled(t, ns)
		}
	}
	ended := time.Now()

	// The writers stop (their writes under way end and are logged), then the books close.
	updateDeployment(t, ns, "writers", func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](0) })
	if err := poll(2*time.Minute, func() bool {
		list := &corev1.PodList{}
		return rc.Client.List(ctx, list, clientNamespace(ns)) == nil && len(list.Items) == 0
	}); err != nil {
		t.Fatalf("the writers did not go:\n%s", clusterState(ns))
	}
	stop()
	h := chaos.History{Lease: chaosLeaseLen, Faults: faults, Ended: ended}
	rec.Into(&h)
	h.Ledger = chaosLedger(t, db)
	var unlogged []string
	h.Writes, unlogged = chaosWrites(t, writeLogs, h.Ledger, db, killed)
	if path := os.Getenv("CHAOS_HISTORY"); path != "" {
		raw, _ := json.MarshalIndent(h, "", " ")
		_ = os.WriteFile(path, raw, 0o600)
	}
	chaosReport(t, h, unlogged)
	if v := chaos.Check(h); len(v) > 0 {
		t.Errorf("%d violations:\n%s", len(v), strings.Join(v, "\n"))
	}
	if _, err := grants.Stop(); err != nil {
		t.Errorf("grant oracle: %v", err)
	}
}

// chaosDeployment is the writers: Warm standbys holding with pkg/holder, writing through
// the SQL fence, logging every write's outcome to a folder on the host that outlives them.
func chaosDeployment(ns, dsn, writeLogs string) *appsv1.Deployment {
	pod := workloadPod(ns, "", chaosLease, corev1.Container{Name: "work", Command: []string{"/workload"},
		Env: []corev1.EnvVar{{Name: "LEDGER_DSN", Value: dsn}, {Name: "HOLDER", Value: "pkg"},
			{Name: "WRITE_LOG", Value: "/writes"}, {Name: "ZOMBIE_ONE_IN", Value: "2"}},
		VolumeMounts: []corev1.VolumeMount{{Name: "writes", MountPath: "/writes"}}})
	pod.Spec.Volumes = []corev1.Volume{{Name: "writes", VolumeSource: corev1.VolumeSource{
		HostPath: &corev1.HostPathVolumeSource{Path: writeLogs, Type: ptr.To(corev1.HostPathDirectory)}}}}
	pod.Labels["app"] = "writers"
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "writers"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](chaosReplicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "writers"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: pod.ObjectMeta, Spec: pod.Spec}}}
}

// chaosSettled waits until both nodes are Ready, a holder renews, and every replica runs
// (standbys to take over), and returns the holder's pod.
func chaosSettled(t *testing.T, ns string) *corev1.Pod {
	t.Helper()
	must(t, rc.WaitForNodes(3*time.Minute))
	var holder *corev1.Pod
	if err := poll(3*time.Minute, func() bool {
		fl := &fencingv1.FencedLease{}
		list := &corev1.PodList{}
		if rc.Client.Get(context.Background(), clientKey(ns, chaosLease), fl) != nil || fl.Status.Holder == nil ||
			fl.Status.Holder.FirstRenewTime == nil || rc.Client.List(context.Background(), list, clientNamespace(ns)) != nil {
			return false
		}
		holder = nil
		running := 0
		for i, p := range list.Items {
			if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
				continue
			}
			running++
			if p.Name == fl.Status.Holder.PodName {
				holder = &list.Items[i]
			}
		}
		return holder != nil && running == chaosReplicas
	}); err != nil {
		t.Fatalf("no holder at work with %d replicas running within 3 minutes:\n%s", chaosReplicas, clusterState(ns))
	}
	return holder
}

func holderToken(p *corev1.Pod) int64 {
	var token int64
	_, _ = fmt.Sscan(p.Annotations[fencingv1.TokenAnnotation], &token)
	return token
}

// killedPods are the pods whose containers a fault killed: a write they committed may
// not have reached their log.
type killedPods struct {
	mu    sync.Mutex
	names map[string]bool
}

func (k *killedPods) add(pod string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.names[pod] = true
}

// containerRunning: the container is running now (its status says so).
func containerRunning(p *corev1.Pod, container string) bool {
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == container {
			return s.State.Running != nil
		}
	}
	return false
}

func (k *killedPods) onNode(t *testing.T, ns, node string) {
	list := &corev1.PodList{}
	must(t, rc.Client.List(context.Background(), list, clientNamespace(ns)))
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, p := range list.Items {
		if p.Spec.NodeName == node {
			k.names[p.Name] = true
		}
	}
}

type holderFault struct {
	name   string
	fate   chaos.GrantFate
	inject func(t *testing.T, ns string, holder *corev1.Pod, killed *killedPods) chaos.Fault
}

// holderFaults are the real-node class's faults, each struck at the holder of the moment.
var holderFaults = []holderFault{
	// A stop-the-world pause: the cgroup freezer, two leases long. Thawed, the holder finds
	// its deadline passed; a zombie writes, and the fence refuses it. The revoked pod is
	// deleted (DeletePod) meanwhile, and its kubelet kills the frozen container once the
	// grace period is out: then there is nothing to thaw.
	{"holder frozen 2 leases", chaos.GrantMoves, func(t *testing.T, ns string, holder *corev1.Pod, killed *killedPods) chaos.Fault {
		start := time.Now()
		must(t, rc.Freeze(holder, "work"))
		time.Sleep(2 * chaosLeaseLen)
		if err := rc.Thaw(holder, "work"); err != nil {
			if p := getPodOrNil(ns, holder.Name); p != nil && containerRunning(p, "work") {
				t.Fatal(err)
			}
			killed.add(holder.Name)
		}
		return chaos.Fault{Start: start, End: time.Now()}
	}},
	// Its packets to the API server dropped, the database still reachable.
	{"holder cut off from the API server", chaos.GrantMoves, func(t *testing.T, ns string, holder *corev1.Pod, _ *killedPods) chaos.Fault {
		start := time.Now()
		must(t, rc.CutFromAPIServer(holder, "work"))
		movedOn(t, ns, holder)
		return chaos.Fault{Start: start, End: time.Now()}
	}},
	// Longer than the node monitor's grace period (20 s): the node goes NotReady; the
	// holder still reaches the API server and renews, and keeps its grant.
	{"holder's kubelet stopped 30 s", chaos.GrantKept, func(t *testing.T, ns string, holder *corev1.Pod, _ *killedPods) chaos.Fault {
		start := time.Now()
		must(t, rc.StopKubelet(holder.Spec.NodeName))
		time.Sleep(30 * time.Second)
		must(t, rc.StartKubelet(holder.Spec.NodeName))
		return chaos.Fault{Start: start, End: time.Now()}
	}},
	// The node loses the control plane, its containers keep running: kubelet stopped, the
	// holder cut off from the API server. Back once the grant moved.
	{"holder's node partitioned", chaos.GrantMoves, func(t *testing.T, ns string, holder *corev1.Pod, _ *killedPods) chaos.Fault {
		start := time.Now()
		must(t, rc.CutFromAPIServer(holder, "work"))
		must(t, rc.StopKubelet(holder.Spec.NodeName))
		movedOn(t, ns, holder)
		must(t, rc.StartKubelet(holder.Spec.NodeName))
		return chaos.Fault{Start: start, End: time.Now()}
	}},
	// Kubelet, containerd and every container of the node killed at once. Booted again
	// once the grant moved.
	{"holder's machine dies", chaos.GrantMoves, func(t *testing.T, ns string, holder *corev1.Pod, killed *killedPods) chaos.Fault {
		killed.onNode(t, ns, holder.Spec.NodeName)
		start := time.Now()
		must(t, rc.KillNode(holder.Spec.NodeName))
		movedOn(t, ns, holder)
		must(t, rc.StartNode(holder.Spec.NodeName))
		return chaos.Fault{Start: start, End: time.Now()}
	}},
}

// movedOn waits until another pod holds and renews, for at most two minutes (the checker
// judges how long it took).
func movedOn(t *testing.T, ns string, holder *corev1.Pod) {
	_ = poll(2*time.Minute, func() bool {
		fl := &fencingv1.FencedLease{}
		if rc.Client.Get(context.Background(), clientKey(ns, chaosLease), fl) != nil {
			return false
		}
		h := fl.Status.Holder
		return h != nil && h.PodUID != holder.UID && h.FirstRenewTime != nil
	})
}
