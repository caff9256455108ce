package authority

import (
	"math"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/controllers/admissioncheck"
	"github.com/fencedlease/fencedlease/test/testenv"
)

const maxToken = math.MaxInt64

func asUser(name string, groups ...string) client.WithWatch {
	GinkgoHelper()
	c, err := client.NewWithWatch(testenv.AsUser(cfg, name, groups, nil), client.Options{Scheme: testenv.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	return c
}

// asPod acts as pod (name, uid) of ns under service account worker, as its bound token does.
func asPod(ns, name string, uid types.UID) client.Client {
	GinkgoHelper()
	c, err := client.New(testenv.AsUser(cfg, "system:serviceaccount:"+ns+":worker",
		[]string{"system:serviceaccounts", "system:serviceaccounts:" + ns},
		map[string][]string{"authentication.kubernetes.io/pod-name": {name}, "authentication.kubernetes.io/pod-uid": {string(uid)}}),
		client.Options{Scheme: testenv.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	return c
}

// bind grants subject the ClusterRole role in ns.
func bind(ns, role string, subject rbacv1.Subject) {
	GinkgoHelper()
	Expect(testenv.BindClusterRole(ctx, k8s, ns, role, subject)).To(Succeed())
}

// world is one spec's namespace: the operator watching it, the oracle on it, and its
// users: editor (built-in edit role), admin (built-in admin role), root (system:masters).
type world struct {
	ns                  string
	editor, admin, root client.WithWatch
	grants              *testenv.GrantWatcher
}

func newWorld() *world {
	GinkgoHelper()
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "auth-"}}
	Expect(k8s.Create(ctx, nsObj)).To(Succeed())
	w := &world{ns: nsObj.Name}
	bind(w.ns, "edit", rbacv1.Subject{Kind: "User", Name: "erin"})
	bind(w.ns, "admin", rbacv1.Subject{Kind: "User", Name: "adam"})
	bind(w.ns, "fencedlease-holder-role", rbacv1.Subject{Kind: "ServiceAccount", Name: "worker", Namespace: w.ns})
	w.editor, w.admin, w.root = asUser("erin"), asUser("adam"), asUser("root", "system:masters")

	var err error
	w.grants, err = testenv.WatchGrants(ctx, k8s, w.ns)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		_, err := w.grants.Stop()
		Expect(err).NotTo(HaveOccurred(), "the grant oracle: never two pods Holding, tokens only rising")
	})
	c, err := testenv.StartController(testenv.AsOperator(cfg), w.ns, testenv.ControllerOptions{Name: "operator"})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(c.Stop()).To(Succeed()) })
	return w
}

// newPod is a pod a user writes: labeled for lease, nothing else of ours.
func newPod(ns, name, lease string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "work", Image: "example.invalid/work"}}},
	}
	if lease != "" {
		p.Labels = map[string]string{fencingv1.LeaseLabel: lease}
	}
	return p
}

// createFL creates a FencedLease as the editor would.
// heldAndWaiting is a world with FencedLease "invoices" (15 s) held by pod a with token 1
// and pod b waiting: where most authority specs start.
func heldAndWaiting() *world {
	GinkgoHelper()
	w := newWorld()
	w.createFL("invoices", 15)
	w.createPod("a", "invoices")
	w.expectHolder("invoices", "a", 1)
	w.createPod("b", "invoices")
	Eventually(func(g Gomega) { w.expectWaiting(g, "b") }).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	return w
}

func (w *world) createFL(name string, duration int32, mutate ...func(*fencingv1.FencedLease)) {
	GinkgoHelper()
	fl := &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name},
		Spec: fencingv1.FencedLeaseSpec{LeaseDurationSeconds: duration, StartupDeadlineSeconds: duration}}
	for _, m := range mutate {
		m(fl)
	}
	Expect(w.editor.Create(ctx, fl)).To(Succeed())
}

// createPod creates a candidate as the editor would; admission gates it.
func (w *world) createPod(name, lease string) *corev1.Pod {
	GinkgoHelper()
	p := newPod(w.ns, name, lease)
	Expect(w.editor.Create(ctx, p)).To(Succeed())
	return p
}

func (w *world) pod(g Gomega, name string) *corev1.Pod {
	p := &corev1.Pod{}
	g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: w.ns, Name: name}, p)).To(Succeed())
	return p
}

func (w *world) fl(g Gomega, name string) *fencingv1.FencedLease {
	fl := &fencingv1.FencedLease{}
	g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: w.ns, Name: name}, fl)).To(Succeed())
	return fl
}

func (w *world) lease(g Gomega, name string) *coordinationv1.Lease {
	l := &coordinationv1.Lease{}
	g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: w.ns, Name: name}, l)).To(Succeed())
	return l
}

// expectHolder waits until status, Lease and pod agree that pod holds token.
func (w *world) expectHolder(lease, pod string, token int64) *fencingv1.FencedLease {
	GinkgoHelper()
	var fl *fencingv1.FencedLease
	Eventually(func(g Gomega) {
		fl = w.fl(g, lease)
		g.Expect(fl.Status.Holder).NotTo(BeNil())
		g.Expect(fl.Status.Holder.PodName).To(Equal(pod))
		g.Expect(fl.Status.Holder.Token).To(Equal(token))
		l := w.lease(g, lease)
		g.Expect(l.Spec.HolderIdentity).To(HaveValue(Equal(pod)))
		g.Expect(l.Annotations).To(HaveKeyWithValue(fencingv1.TokenAnnotation, strconv.FormatInt(token, 10)))
		p := w.pod(g, pod)
		g.Expect(p.Annotations).To(HaveKeyWithValue(fencingv1.TokenAnnotation, strconv.FormatInt(token, 10)))
		g.Expect(p.Annotations).To(HaveKeyWithValue(fencingv1.StateAnnotation, string(fencingv1.PodHolding)))
		g.Expect(p.Spec.SchedulingGates).To(BeEmpty())
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	return fl
}

// expectWaiting asserts pod was never granted: gated, Waiting, no token.
func (w *world) expectWaiting(g Gomega, pod string) {
	p := w.pod(g, pod)
	g.Expect(p.Annotations).NotTo(HaveKey(fencingv1.TokenAnnotation))
	g.Expect(p.Annotations).To(HaveKeyWithValue(fencingv1.StateAnnotation, string(fencingv1.PodWaiting)))
	g.Expect(p.Spec.SchedulingGates).To(ContainElement(corev1.PodSchedulingGate{Name: fencingv1.SchedulingGate}))
}

// expectHeld waits for the Held condition's reason and a message containing message.
func (w *world) expectHeld(lease string, status metav1.ConditionStatus, reason, message string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		c := meta.FindStatusCondition(w.fl(g, lease).Status.Conditions, fencingv1.ConditionHeld)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(status))
		g.Expect(c.Reason).To(Equal(reason))
		g.Expect(c.Message).To(ContainSubstring(message))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
}

// update re-reads obj as c, applies mutate and writes it back, retrying conflicts only.
func update[T client.Object](c client.Client, obj T, mutate func(T)) error {
	for {
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		mutate(obj)
		err := c.Update(ctx, obj)
		if !apierrors.IsConflict(err) {
			return err
		}
	}
}

// expectDenied asserts the write was refused by admission with message.
func expectDenied(err error, message string) {
	GinkgoHelper()
	Expect(err).To(HaveOccurred())
	Expect(apierrors.IsInvalid(err) || apierrors.IsForbidden(err)).To(BeTrue(), "got %v", err)
	Expect(err.Error()).To(ContainSubstring(message))
}

// briefly is how long a "never happens" is watched.
const briefly = 1500 * time.Millisecond

func metricOf(c *admissioncheck.Checker, policy string) prometheus.Gauge {
	return c.Metrics.Gauge(policy)
}

// leaseLabeled is a Lease labeled as the operator's, as anyone might try to create it.
func leaseLabeled(ns, name string) *coordinationv1.Lease {
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		Labels: map[string]string{fencingv1.LeaseLabel: name}}}
}

// finish plays the kubelet reporting pod Succeeded (through pods/status: an update of the
// pod itself drops status changes).
func (w *world) finish(pod string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		p := w.pod(g, pod)
		p.Status.Phase = corev1.PodSucceeded
		g.Expect(w.root.Status().Update(ctx, p)).To(Succeed())
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
}
