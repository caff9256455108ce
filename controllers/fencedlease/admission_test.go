package fencedlease_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// leaseFoundOf is pod p's condition FencedLeaseFound, or nil.
func leaseFoundOf(p *corev1.Pod) *corev1.PodCondition {
	return conditionOf(p, fencingv1.LeaseFoundCondition)
}

// conditionOf is pod p's condition of type t, or nil.
func conditionOf(p *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// eventReasonsOf are the reasons of the events regarding pod name in ns.
func eventReasonsOf(g Gomega, ns, name string) []string {
	events := &eventsv1.EventList{}
	g.Expect(k8s.List(ctx, events, client.InNamespace(ns))).To(Succeed())
	var reasons []string
	for _, e := range events.Items {
		if e.Regarding.Name == name {
			reasons = append(reasons, e.Reason)
		}
	}
	return reasons
}

// Admission gates every candidate alike and reads no FencedLease (issue 59, item 2): the
// operator decides what depends on it, from the spec as it is when it acts.
var _ = Describe("Candidates admitted alike", func() {
	var ns string
	BeforeEach(func() {
		ns = newNamespace()
		startController(ns, controllerOpts{id: "ctrl"})
	})

	It("W1: lets a Warm FencedLease's gated candidates run at once, in one write, and grants the oldest", func() {
		Expect(k8s.Create(ctx, &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "invoices"},
			Spec: fencingv1.FencedLeaseSpec{LeaseDurationSeconds: 15, Standby: fencingv1.StandbyWarm}})).To(Succeed())
		a := createPod(ns, "a", "invoices")
		b := createPod(ns, "b", "invoices")
		By("each in one write: no version of b shows the gate removed without standby Warm, or the reverse")
		w, err := k8s.Watch(ctx, &corev1.PodList{}, client.InNamespace(ns), client.MatchingFields{"metadata.name": "b"},
			&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: b.ResourceVersion}})
		Expect(err).NotTo(HaveOccurred())
		defer w.Stop()
		Eventually(func(g Gomega) {
			select {
			case e := <-w.ResultChan():
				q, ok := e.Object.(*corev1.Pod)
				g.Expect(ok).To(BeTrue(), "watch event %v", e.Object)
				_, warm := q.Annotations[fencingv1.StandbyAnnotation]
				Expect(warm).To(Equal(len(q.Spec.SchedulingGates) == 0), "version %s of b", q.ResourceVersion)
				g.Expect(warm).To(BeTrue())
			default:
				g.Expect("no event yet").To(BeEmpty())
			}
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		Eventually(func(g Gomega) {
			q := getPod(g, ns, a.Name)
			g.Expect(q.Spec.SchedulingGates).To(BeEmpty())
			g.Expect(q.Annotations).To(HaveKeyWithValue(fencingv1.StandbyAnnotation, "Warm"))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		Expect(getPodDirect(ns, "b").Annotations).To(HaveKeyWithValue(fencingv1.StateAnnotation, "Waiting"), "b waits, running")
		expectHolder(ns, "invoices", "a", 1)
	})

	It("W1: decides from the spec when it acts: a Cold FencedLease's candidates stay gated; switched to Warm, the waiting ones run", func() {
		createFL(ns, "invoices", 15, fencingv1.KeepPodPolicy)
		createPod(ns, "a", "invoices")
		createPod(ns, "b", "invoices")
		expectHolder(ns, "invoices", "a", 1)
		Consistently(func(g Gomega) {
			q := getPod(g, ns, "b")
			g.Expect(q.Spec.SchedulingGates).To(ConsistOf(corev1.PodSchedulingGate{Name: fencingv1.SchedulingGate}))
			g.Expect(q.Annotations).NotTo(HaveKey(fencingv1.StandbyAnnotation))
		}).WithTimeout(2 * time.Second).WithPolling(poll).Should(Succeed())

		By("switching the FencedLease to Warm")
		Eventually(func() error {
			fl := getFL(ns, "invoices")
			fl.Spec.Standby = fencingv1.StandbyWarm
			return k8s.Update(ctx, fl)
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		Eventually(func(g Gomega) {
			q := getPod(g, ns, "b")
			g.Expect(q.Spec.SchedulingGates).To(BeEmpty())
			g.Expect(q.Annotations).To(HaveKeyWithValue(fencingv1.StandbyAnnotation, "Warm"))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		Expect(getFL(ns, "invoices").Status.Holder.PodName).To(Equal("a"), "letting b run granted nothing")

		By("a candidate admitted before, with standby Cold recorded, stays Cold")
		old := candidatePod(ns, "old", "invoices")
		old.Annotations[fencingv1.StandbyAnnotation] = "Cold"
		Expect(k8s.Create(ctx, old)).To(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(getPod(g, ns, "old").Spec.SchedulingGates).NotTo(BeEmpty())
		}).WithTimeout(2 * time.Second).WithPolling(poll).Should(Succeed())
	})

	It("W2: tells a pod whose FencedLease does not exist so, within seconds, and grants it once the FencedLease is created", func() {
		start := time.Now()
		createPod(ns, "early", "payroll")
		Eventually(func(g Gomega) {
			c := leaseFoundOf(getPod(g, ns, "early"))
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(corev1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(fencingv1.ReasonFencedLeaseNotFound))
			g.Expect(c.Message).To(ContainSubstring(`the label fencing.fencedlease.io/lease names FencedLease "payroll", which does not exist in namespace`))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		GinkgoWriter.Printf("condition set %v after the pod's creation\n", time.Since(start))
		Eventually(func(g Gomega) {
			g.Expect(eventReasonsOf(g, ns, "early")).To(ConsistOf(fencingv1.ReasonFencedLeaseNotFound), "one event, not one per pass")
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		Expect(getPodDirect(ns, "early").Spec.SchedulingGates).NotTo(BeEmpty(), "it waits, gated")

		By("creating the FencedLease")
		createFL(ns, "payroll", 15, fencingv1.KeepPodPolicy)
		expectHolder(ns, "payroll", "early", 1)
		Eventually(func(g Gomega) {
			c := leaseFoundOf(getPod(g, ns, "early"))
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(corev1.ConditionTrue))
			g.Expect(c.Reason).To(Equal(fencingv1.ReasonFencedLeaseFound))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	})

	It("W3: tells a labeled pod that admission never saw so, once, and never grants it; an admitted one is granted", func() {
		createFL(ns, "payroll", 15, fencingv1.KeepPodPolicy)
		// As the API server stores a labeled pod while no admission acts: as written.
		stray := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stray", Labels: map[string]string{fencingv1.LeaseLabel: "payroll"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "work", Image: "example.invalid/work"}}}}
		Expect(k8s.Create(ctx, stray)).To(Succeed())
		Eventually(func(g Gomega) {
			c := conditionOf(getPod(g, ns, "stray"), fencingv1.AdmittedCondition)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(corev1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(fencingv1.ReasonNotAdmitted))
			g.Expect(c.Message).To(ContainSubstring("not admitted as a candidate"))
			g.Expect(eventReasonsOf(g, ns, "stray")).To(ConsistOf(fencingv1.ReasonNotAdmitted))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())

		createPod(ns, "admitted", "payroll")
		expectHolder(ns, "payroll", "admitted", 1)
		Consistently(func(g Gomega) {
			g.Expect(eventReasonsOf(g, ns, "stray")).To(ConsistOf(fencingv1.ReasonNotAdmitted), "one event, not one per pass")
			g.Expect(getPodDirect(ns, "stray").Annotations).NotTo(HaveKey(fencingv1.TokenAnnotation), "never granted")
		}).WithTimeout(2 * time.Second).WithPolling(poll).Should(Succeed())
	})
})

func getPodDirect(ns, name string) *corev1.Pod {
	GinkgoHelper()
	p := &corev1.Pod{}
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p)).To(Succeed())
	return p
}
