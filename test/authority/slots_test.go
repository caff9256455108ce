package authority

import (
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

const (
	slotLabelFixed      = "the label fencing.fencedlease.io/slot of a holder is written by the operator alone"
	slotAnnotationFixed = "the annotation fencing.fencedlease.io/slot is written by the operator alone"
)

var _ = Describe("Slots (issue 49): who may move a pod or a Lease between slots", func() {
	var w *world
	BeforeEach(func() {
		w = newWorld()
		w.createFL("shards", 15, func(fl *fencingv1.FencedLease) { fl.Spec.Holders = 2 })
		w.createPod("x", "shards")
		w.createPod("y", "shards")
		w.createPod("z", "shards")
		Eventually(func(g Gomega) {
			fl := w.fl(g, "shards")
			g.Expect(fl.Status.Holding).To(Equal("2/2"))
			for _, p := range []string{"x", "y"} {
				g.Expect(w.pod(g, p).Labels).To(HaveKey(fencingv1.SlotLabel))
			}
			w.expectWaiting(g, "z")
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	})

	It("refuses moving a holder's slot label or any pod's slot annotation, to every user", func() {
		for _, c := range []client.Client{w.editor, w.admin, w.root} {
			expectDenied(update(c, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "x"}},
				func(p *corev1.Pod) { p.Labels[fencingv1.SlotLabel] = "1" }), slotLabelFixed)
			expectDenied(update(c, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "x"}},
				func(p *corev1.Pod) { delete(p.Labels, fencingv1.SlotLabel) }), slotLabelFixed)
			expectDenied(update(c, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "y"}},
				func(p *corev1.Pod) { p.Annotations[fencingv1.SlotAnnotation] = "0" }), slotAnnotationFixed)
			expectDenied(update(c, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "z"}},
				func(p *corev1.Pod) { p.Annotations[fencingv1.SlotAnnotation] = "1" }), slotAnnotationFixed)
		}
		By("a candidate created with a slot of its own is refused by admission")
		forged := newPod(w.ns, "forged", "shards")
		forged.Annotations = map[string]string{fencingv1.SlotAnnotation: "0"}
		expectDenied(w.editor.Create(ctx, forged), "pods may not set the annotation fencing.fencedlease.io/slot")
		forged = newPod(w.ns, "forged", "shards")
		forged.Labels[fencingv1.SlotLabel] = "0"
		expectDenied(w.editor.Create(ctx, forged), "pods may not carry the label fencing.fencedlease.io/slot")
	})

	It("lets each holder renew its own slot's Lease only", func() {
		slotOf := func(name string) int32 {
			s, err := strconv.Atoi(w.pod(Default, name).Annotations[fencingv1.SlotAnnotation])
			Expect(err).NotTo(HaveOccurred())
			return int32(s)
		}
		x := w.pod(Default, "x")
		mine, theirs := fencingv1.SlotLeaseName("shards", slotOf("x")), fencingv1.SlotLeaseName("shards", slotOf("y"))
		renewAs := func(lease string) error {
			l := &coordinationv1.Lease{}
			Expect(w.root.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: lease}, l)).To(Succeed())
			l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
			return asPod(w.ns, "x", x.UID).Update(ctx, l)
		}
		Expect(renewAs(mine)).To(Succeed())
		expectDenied(renewAs(theirs), "only pod y (the holder) may renew or release this Lease, not pod x")
	})

	It("injects FENCING_SLOT and the slot file into every candidate, whatever spec.holders is when it is admitted", func() {
		z := w.pod(Default, "z")
		Expect(z.Spec.Containers[0].Env).To(ContainElement(HaveField("Name", fencingv1.EnvSlot)))
		Expect(z.Spec.Volumes).To(ContainElement(HaveField("VolumeSource.DownwardAPI.Items", ContainElement(HaveField("Path", "slot")))))
		// A FencedLease of one grant may be raised to slots after its pods were admitted
		// (issue 61, defect 2): they read their slot from the grant all the same.
		w.createFL("single", 15)
		w.createPod("s", "single")
		s := w.pod(Default, "s")
		Expect(s.Spec.Containers[0].Env).To(ContainElement(HaveField("Name", fencingv1.EnvSlot)))
		Expect(s.Spec.Volumes).To(ContainElement(HaveField("VolumeSource.DownwardAPI.Items", ContainElement(HaveField("Path", "slot")))))
	})
})
