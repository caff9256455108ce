package fencedlease_test

import (
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

var _ = Describe("API validation", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	// Sent as raw JSON, so a zero is on the wire and not dropped by omitempty.
	DescribeTable("rejects an invalid spec with a readable message",
		func(spec map[string]any, message string) {
			u := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": fencingv1.GroupVersion.String(),
				"kind":       "FencedLease",
				"metadata":   map[string]any{"namespace": ns, "name": "bad"},
				"spec":       spec,
			}}
			err := k8s.Create(ctx, u)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
			Expect(err.Error()).To(ContainSubstring(message))
		},
		Entry("zero duration", map[string]any{"leaseDurationSeconds": 0},
			"spec.leaseDurationSeconds: Invalid value: 0: spec.leaseDurationSeconds in body should be greater than or equal to 1"),
		Entry("negative duration", map[string]any{"leaseDurationSeconds": -1},
			"spec.leaseDurationSeconds: Invalid value: -1: spec.leaseDurationSeconds in body should be greater than or equal to 1"),
		Entry("duration over an hour", map[string]any{"leaseDurationSeconds": 3601},
			"spec.leaseDurationSeconds: Invalid value: 3601: spec.leaseDurationSeconds in body should be less than or equal to 3600"),
		Entry("zero startup deadline", map[string]any{"startupDeadlineSeconds": 0},
			"spec.startupDeadlineSeconds: Invalid value: 0: spec.startupDeadlineSeconds in body should be greater than or equal to 1"),
		Entry("startup deadline over an hour", map[string]any{"startupDeadlineSeconds": 3601},
			"spec.startupDeadlineSeconds: Invalid value: 3601: spec.startupDeadlineSeconds in body should be less than or equal to 3600"),
		Entry("zero hand-off grace period", map[string]any{"handoffGracePeriodSeconds": 0},
			"spec.handoffGracePeriodSeconds: Invalid value: 0: spec.handoffGracePeriodSeconds in body should be greater than or equal to 1"),
		Entry("hand-off grace period over an hour", map[string]any{"handoffGracePeriodSeconds": 3601},
			"spec.handoffGracePeriodSeconds: Invalid value: 3601: spec.handoffGracePeriodSeconds in body should be less than or equal to 3600"),
		Entry("a negative token floor", map[string]any{"minFencingToken": -1},
			"spec.minFencingToken: Invalid value: -1: spec.minFencingToken in body should be greater than or equal to 0"),
		Entry("unknown policy", map[string]any{"revocationPolicy": "Sometimes"},
			`spec.revocationPolicy: Unsupported value: "Sometimes": supported values: "DeletePod", "KeepPod"`),
		Entry("a duration that is not a number", map[string]any{"leaseDurationSeconds": "15s"},
			`spec.leaseDurationSeconds: Invalid value: "string": spec.leaseDurationSeconds in body must be of type integer`),
	)

	// A pod names its FencedLease in a label, and a label value is at most 63 characters:
	// a longer name could never have a candidate, so it is refused at apply.
	It("refuses a name no pod label could carry, and grants at the longest one it can", func() {
		long := &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: strings.Repeat("a", 64)}}
		err := k8s.Create(ctx, long)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
		Expect(err.Error()).To(ContainSubstring("metadata.name may be at most 63 characters"))
		Expect(err.Error()).To(ContainSubstring("a label value is at most 63 characters"))

		name := strings.Repeat("b", 63)
		startController(ns, controllerOpts{id: "ctrl"})
		createFL(ns, name, 10, fencingv1.DeletePodPolicy)
		createPod(ns, "p", name)
		expectHolder(ns, name, "p", 1)
	})

	It("defaults the spec", func() {
		fl := &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "defaults"}}
		Expect(k8s.Create(ctx, fl)).To(Succeed())
		Expect(fl.Spec.LeaseDurationSeconds).To(BeEquivalentTo(15))
		Expect(fl.Spec.StartupDeadlineSeconds).To(BeEquivalentTo(300))
		Expect(fl.Spec.HandoffGracePeriodSeconds).To(BeEquivalentTo(30))
		Expect(fl.Spec.RevocationPolicy).To(Equal(fencingv1.DeletePodPolicy))
		Expect(fl.Spec.Suspend).To(BeFalse())
	})

	It("refuses a status write that lowers the fencing token", func() {
		fl := &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "monotonic"}}
		Expect(k8s.Create(ctx, fl)).To(Succeed())
		fl.Status.FencingToken = 7
		Expect(k8s.Status().Update(ctx, fl)).To(Succeed())
		fl.Status.FencingToken = 6
		err := k8s.Status().Update(ctx, fl)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
		Expect(err.Error()).To(ContainSubstring("status.fencingToken may never decrease"))
	})
})
