package policy

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
})
