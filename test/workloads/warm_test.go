package workloads

import (
	"context"
	"sort"
	"strconv"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/pkg/holder"
	"github.com/fencedlease/fencedlease/test/testenv"
)

// warmHolders plays the workload of every running Warm standby of a namespace as
// `fencedlease hold -- CMD` does: it waits for the grant with StartWhenGranted (CMD would
// start when it returns), renews, and releases when its pod is being deleted (SIGTERM).
type warmHolders struct {
	ns string
	cs *kubernetes.Clientset

	mu      sync.Mutex
	seen    map[types.UID]bool
	working map[string]time.Time // pod → when its command would have started
	ended   map[string]time.Time // pod → when it saw SIGTERM and released
	tokens  map[string]int64
	drained []string // pods asked to hand off
}

func startWarmHolders(ns string) *warmHolders {
	GinkgoHelper()
	hs := &warmHolders{ns: ns, cs: kubernetes.NewForConfigOrDie(cl.Config), seen: map[types.UID]bool{},
		working: map[string]time.Time{}, ended: map[string]time.Time{}, tokens: map[string]int64{}}
	hctx, stop := context.WithCancel(ctx)
	DeferCleanup(stop)
	go func() {
		defer GinkgoRecover()
		for hctx.Err() == nil {
			hs.startWaiters(hctx)
			select {
			case <-hctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return hs
}

// startWaiters starts a waiter in every running standby that has none.
func (hs *warmHolders) startWaiters(ctx context.Context) {
	pods := &corev1.PodList{}
	if k8s.List(ctx, pods, client.InNamespace(hs.ns), client.HasLabels{fencingv1.LeaseLabel}) != nil {
		return
	}
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil || p.Annotations[fencingv1.StandbyAnnotation] != "Warm" {
			continue
		}
		hs.mu.Lock()
		if !hs.seen[p.UID] {
			hs.seen[p.UID] = true
			go hs.hold(ctx, p.Name, p.UID, p.Labels[fencingv1.LeaseLabel])
		}
		hs.mu.Unlock()
	}
}

func (hs *warmHolders) hold(ctx context.Context, pod string, uid types.UID, lease string) {
	defer GinkgoRecover()
	podCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { // the pod's SIGTERM: its deletion
		for podCtx.Err() == nil {
			p := &corev1.Pod{}
			if err := k8s.Get(podCtx, client.ObjectKey{Namespace: hs.ns, Name: pod}, p); err != nil || p.UID != uid || p.DeletionTimestamp != nil {
				stop()
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	h, err := holder.StartWhenGranted(podCtx, holder.Config{Leases: holder.ClientGo(hs.cs.CoordinationV1()), Namespace: hs.ns,
		LeaseName: lease, Identity: pod, UID: uid})
	if err != nil {
		return // stopped before it was granted
	}
	hs.mu.Lock()
	hs.working[pod], hs.tokens[pod] = time.Now(), h.Token()
	hs.mu.Unlock()
	select {
	case <-h.Context().Done():
	case <-h.Draining():
		hs.mu.Lock()
		hs.drained = append(hs.drained, pod)
		hs.mu.Unlock()
		<-h.Context().Done()
	}
	if ctx.Err() == nil && podCtx.Err() != nil {
		at := time.Now()
		_ = h.Release(context.WithoutCancel(ctx))
		hs.mu.Lock()
		hs.ended[pod] = at
		hs.mu.Unlock()
	}
}

// gap is how long after the previous holder ended (SIGTERM, release) the holder with token
// started working; 0 when either is unknown.
func (hs *warmHolders) gap(token int64) time.Duration {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	var next, prev string
	for pod, t := range hs.tokens {
		switch t {
		case token:
			next = pod
		case token - 1:
			prev = pod
		}
	}
	if next == "" || prev == "" || hs.ended[prev].IsZero() {
		return 0
	}
	return hs.working[next].Sub(hs.ended[prev])
}

// askedToHandOff lists the holders that were asked to hand off: a Warm rollout asks none.
func (hs *warmHolders) askedToHandOff() []string {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return append([]string(nil), hs.drained...)
}

func (hs *warmHolders) workingTokens() []int64 {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	var out []int64
	for _, t := range hs.tokens {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func createWarmFL(ns string) {
	GinkgoHelper()
	Expect(k8s.Create(ctx, &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "invoices"},
		Spec: fencingv1.FencedLeaseSpec{LeaseDurationSeconds: 3, StartupDeadlineSeconds: 30, HandoffGracePeriodSeconds: 5,
			Standby: fencingv1.StandbyWarm}})).To(Succeed())
}

// expectWarmHolder waits until the holder has token, runs image, and its waiter works.
func expectWarmHolder(ns string, hs *warmHolders, token int64, image string) string {
	GinkgoHelper()
	name := expectHolderRunning(ns, token, image)
	Eventually(hs.workingTokens).WithTimeout(timeout).WithPolling(poll).Should(ContainElement(token))
	return name
}

func warmDeployment(ns string, replicas int32) *appsv1.Deployment {
	d := rollingDeployment(ns)
	d.Spec.Replicas = ptr.To(replicas)
	return d
}

var _ = Describe("Warm standby on real workload controllers (issue 21, items 3 and 4)", func() {
	var ns string
	var grants *testenv.GrantWatcher
	BeforeEach(func() {
		ns, grants = newWatchedNamespace()
		createWarmFL(ns)
	})

	for _, replicas := range []int32{1, 3} {
		It("rolls a Deployment of "+strconv.Itoa(int(replicas))+" Warm replicas out to completion: standbys are Ready, no hand-off is asked, the grant moves once, to the new revision", func() {
			hs := startWarmHolders(ns)
			d := warmDeployment(ns, replicas)
			Expect(k8s.Create(ctx, d)).To(Succeed())
			expectWarmHolder(ns, hs, 1, "example.invalid/scheduler:v1")
			expectDeploymentComplete(d, replicas)

			updated := rollTo(d, "example.invalid/scheduler:v2")
			expectWarmHolder(ns, hs, 2, "example.invalid/scheduler:v2")
			expectDeploymentComplete(d, replicas)
			GinkgoWriter.Printf("Warm Deployment x%d: update → rollout complete %v; old holder's release → new holder working %v\n",
				replicas, time.Since(updated), hs.gap(2))
			fl := getFL(Default, ns)
			Expect(fl.Status.Revocations).To(BeZero())
			Expect(fl.Status.Holder.Token).To(BeEquivalentTo(2), "the grant moved once: to a pod of the new revision")
			Expect(grants.Tokens()).To(Equal([]int64{1, 2}))
			Expect(hs.askedToHandOff()).To(BeEmpty(), "a Warm rollout asks no hand-off")
		})
	}

	It("rolls a 3-replica OrderedReady StatefulSet out to completion; the grant moves once, to an updated pod", func() {
		hs := startWarmHolders(ns)
		s := &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "scheduler"},
			Spec: appsv1.StatefulSetSpec{
				Replicas: ptr.To[int32](3), ServiceName: "scheduler", // OrderedReady, the default
				Selector: &metav1.LabelSelector{MatchLabels: template("").Labels}, Template: template("example.invalid/scheduler:v1"),
			},
		}
		Expect(k8s.Create(ctx, s)).To(Succeed())
		expectWarmHolder(ns, hs, 1, "example.invalid/scheduler:v1")
		expectStatefulSetComplete(s, 3)

		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(s), s)).To(Succeed())
		s.Spec.Template.Spec.Containers[0].Image = "example.invalid/scheduler:v2"
		Expect(k8s.Update(ctx, s)).To(Succeed())
		updated := time.Now()
		expectWarmHolder(ns, hs, 2, "example.invalid/scheduler:v2")
		expectStatefulSetComplete(s, 3)
		GinkgoWriter.Printf("Warm StatefulSet x3: update → rollout complete %v; old holder's release → new holder working %v\n",
			time.Since(updated), hs.gap(2))
		fl := getFL(Default, ns)
		Expect(fl.Status.Revocations).To(BeZero())
		Expect(fl.Status.Holder.Token).To(BeEquivalentTo(2))
		Expect(grants.Tokens()).To(Equal([]int64{1, 2}))
		Expect(hs.askedToHandOff()).To(BeEmpty(), "a Warm rollout asks no hand-off")
	})

	It("sends a Service's traffic to the holder only: its EndpointSlices list the holder's address, and the new holder's after a failover", func() {
		hs := startWarmHolders(ns)
		d := warmDeployment(ns, 3)
		Expect(k8s.Create(ctx, d)).To(Succeed())
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "scheduler"},
			Spec: corev1.ServiceSpec{
				Selector: map[string]string{"app": "scheduler", fencingv1.HolderLabel: "true"},
				Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}},
			},
		}
		Expect(k8s.Create(ctx, svc)).To(Succeed())
		first := expectWarmHolder(ns, hs, 1, "example.invalid/scheduler:v1")
		expectDeploymentComplete(d, 3)
		expectEndpoints(ns, first)

		By("deleting the holder: the next standby is granted, and the Service follows")
		p := get(Default, ns, first)
		Expect(k8s.Delete(ctx, p)).To(Succeed())
		deleted := time.Now()
		next := expectWarmHolder(ns, hs, 2, "example.invalid/scheduler:v1")
		expectEndpoints(ns, next)
		GinkgoWriter.Printf("holder deleted → EndpointSlices list only the new holder: %v\n", time.Since(deleted))
	})
})

// expectEndpoints waits until Service "scheduler"'s EndpointSlices list exactly pod's
// address.
func expectEndpoints(ns, pod string) {
	GinkgoHelper()
	expectEndpointsOf(ns, "scheduler", pod)
}

// expectEndpointsOf waits until service's EndpointSlices list exactly pod's address.
func expectEndpointsOf(ns, service, pod string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		want := get(g, ns, pod).Status.PodIP
		g.Expect(want).NotTo(BeEmpty())
		slices := &discoveryv1.EndpointSliceList{}
		g.Expect(k8s.List(ctx, slices, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: service})).To(Succeed())
		var addrs []string
		for _, s := range slices.Items {
			for _, e := range s.Endpoints {
				if e.Conditions.Ready == nil || *e.Conditions.Ready {
					addrs = append(addrs, e.Addresses...)
				}
			}
		}
		g.Expect(addrs).To(Equal([]string{want}), "ready endpoints, want only %s's", pod)
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
}

func expectDeploymentComplete(d *appsv1.Deployment, replicas int32) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(d), d)).To(Succeed())
		g.Expect(d.Status.ObservedGeneration).To(Equal(d.Generation))
		g.Expect(d.Status.UpdatedReplicas).To(Equal(replicas))
		g.Expect(d.Status.AvailableReplicas).To(Equal(replicas))
		g.Expect(d.Status.Replicas).To(Equal(replicas))
		var progressing *appsv1.DeploymentCondition
		for i := range d.Status.Conditions {
			if d.Status.Conditions[i].Type == appsv1.DeploymentProgressing {
				progressing = &d.Status.Conditions[i]
			}
		}
		g.Expect(progressing).NotTo(BeNil())
		g.Expect(progressing.Reason).To(Equal("NewReplicaSetAvailable"), "kubectl rollout status reports complete")
	}).WithTimeout(2 * timeout).WithPolling(poll).Should(Succeed()) // the workload controllers and kwok, on a loaded machine
}

func expectStatefulSetComplete(s *appsv1.StatefulSet, replicas int32) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(s), s)).To(Succeed())
		g.Expect(s.Status.ObservedGeneration).To(Equal(s.Generation))
		g.Expect(s.Status.ReadyReplicas).To(Equal(replicas))
		g.Expect(s.Status.UpdatedReplicas).To(Equal(replicas))
		g.Expect(s.Status.CurrentRevision).To(Equal(s.Status.UpdateRevision), "kubectl rollout status reports complete")
	}).WithTimeout(2 * timeout).WithPolling(poll).Should(Succeed()) // the workload controllers and kwok, on a loaded machine
}
