package policy

import (
	"errors"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fencedlease/fencedlease/pkg/fence"
)

var _ = Describe("Object fence policy", func() {
	var ns string
	BeforeEach(func() {
		nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "fence-"}}
		Expect(admin.Create(ctx, nsObj)).To(Succeed())
		ns = nsObj.Name
	})

	It("refuses a write with a lower token and accepts equal or higher ones", func() {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "invoice-manifest"}, Data: map[string]string{"run": "by-82"}}
		fence.Stamp(cm, 82)
		Expect(admin.Create(ctx, cm)).To(Succeed())

		By("the paused holder with token 81 resuming")
		stale := cm.DeepCopy()
		fence.Stamp(stale, 81)
		stale.Data["run"] = "by-81"
		expectDenied(admin.Update(ctx, stale), "stale fencing token 81: this object was already written with token 82")

		By("a retry within generation 82, then generation 83")
		fence.Stamp(cm, 82)
		cm.Data["run"] = "by-82-retry"
		Expect(admin.Update(ctx, cm)).To(Succeed())
		fence.Stamp(cm, 83)
		cm.Data["run"] = "by-83"
		Expect(admin.Update(ctx, cm)).To(Succeed())

		By("a write that brings no token")
		delete(cm.Annotations, fence.TokenAnnotation)
		expectDenied(admin.Update(ctx, cm), `a write to a fenced object must carry its fencing token in annotation fencing.fencedlease.io/token (a decimal integer), got ""`)
	})

	It("leaves objects that did not opt in alone", func() {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "plain",
			Annotations: map[string]string{fence.TokenAnnotation: "9"}}}
		Expect(admin.Create(ctx, cm)).To(Succeed())
		cm.Annotations[fence.TokenAnnotation] = "1"
		Expect(admin.Update(ctx, cm)).To(Succeed())
	})

	It("covers subresources: a status write that can change metadata cannot lower the token", func() {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fenced-pod"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.invalid/c"}}}}
		fence.Stamp(p, 5)
		Expect(admin.Create(ctx, p)).To(Succeed())
		p.Annotations[fence.TokenAnnotation] = "4"
		expectDenied(admin.Status().Update(ctx, p), "stale fencing token 4: this object was already written with token 5")
	})

	It("writes a custom resource's status as one fenced step with UpdateStatus", func() {
		setCount := func(u *unstructured.Unstructured, n int64) func() {
			return func() { Expect(unstructured.SetNestedField(u.Object, n, "status", "count")).To(Succeed()) }
		}
		w := newWidget(ns, "invoice-run")
		fence.Stamp(w, 2)
		Expect(admin.Create(ctx, w)).To(Succeed())
		Expect(fence.UpdateStatus(ctx, admin, w, 2, setCount(w, 1))).To(Succeed())

		By("a stale holder, reading afresh after generation 3 wrote: its stamp is refused, its status never written")
		Expect(fence.UpdateStatus(ctx, admin, w, 3, setCount(w, 2))).To(Succeed())
		stale := newWidget(ns, "invoice-run")
		Expect(admin.Get(ctx, client.ObjectKeyFromObject(stale), stale)).To(Succeed())
		err := fence.UpdateStatus(ctx, admin, stale, 2, setCount(stale, 99))
		var staleErr *fence.StaleTokenError
		Expect(errors.As(err, &staleErr)).To(BeTrue(), "got %v", err)
		Expect(errors.Is(err, fence.ErrStaleToken)).To(BeTrue())
		Expect(staleErr.Offered).To(BeEquivalentTo(2))
		Expect(staleErr.Stored).To(BeEquivalentTo(3))

		By("a newer generation stamping between an older one's stamp and its status write: the status write conflicts")
		older := newWidget(ns, "invoice-run")
		Expect(admin.Get(ctx, client.ObjectKeyFromObject(older), older)).To(Succeed())
		err = fence.UpdateStatus(ctx, admin, older, 3, func() {
			newer := newWidget(ns, "invoice-run")
			Expect(admin.Get(ctx, client.ObjectKeyFromObject(newer), newer)).To(Succeed())
			Expect(fence.UpdateStatus(ctx, admin, newer, 4, setCount(newer, 4))).To(Succeed())
			setCount(older, 3)()
		})
		Expect(apierrors.IsConflict(err)).To(BeTrue(), "got %v", err)
		Expect(admin.Get(ctx, client.ObjectKeyFromObject(w), w)).To(Succeed())
		count, _, _ := unstructured.NestedInt64(w.Object, "status", "count")
		Expect(count).To(BeEquivalentTo(4), "the newer generation's status stands")
		Expect(w.GetAnnotations()).To(HaveKeyWithValue(fence.TokenAnnotation, "4"))
	})
})
