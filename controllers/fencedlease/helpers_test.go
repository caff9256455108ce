package fencedlease_test

import (
	"context"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/test/testenv"
)

var ctx = context.Background()

const (
	timeout = 15 * time.Second
	poll    = 50 * time.Millisecond
)

func createFL(ns, name string, duration int32, policy fencingv1.RevocationPolicy) *fencingv1.FencedLease {
	GinkgoHelper()
	fl := &fencingv1.FencedLease{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		// A startup deadline equal to the duration: a holder that never renews is revoked
		// one duration after its grant. Specs about startup set their own.
		Spec: fencingv1.FencedLeaseSpec{LeaseDurationSeconds: duration, StartupDeadlineSeconds: duration, RevocationPolicy: policy},
	}
	Expect(k8s.Create(ctx, fl)).To(Succeed())
	return fl
}

// createPod creates a candidate as the admission webhook would leave it: labeled,
// gated, state Waiting.
func createPod(ns, name, lease string) *corev1.Pod {
	GinkgoHelper()
	p := candidatePod(ns, name, lease)
	Expect(k8s.Create(ctx, p)).To(Succeed())
	return p
}

// candidatePod is a pod as the webhook leaves a candidate.
var candidatePod = testenv.CandidatePod

func getFL(ns, name string) *fencingv1.FencedLease {
	GinkgoHelper()
	fl := &fencingv1.FencedLease{}
	Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, fl)).To(Succeed())
	return fl
}

func getLease(g Gomega, ns, name string) *coordinationv1.Lease {
	l := &coordinationv1.Lease{}
	g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, l)).To(Succeed())
	return l
}

func getPod(g Gomega, ns, name string) *corev1.Pod {
	p := &corev1.Pod{}
	g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, p)).To(Succeed())
	return p
}

func podGone(ns, name string) bool {
	err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &corev1.Pod{})
	return apierrors.IsNotFound(err)
}

// expectHolder waits until status, Lease and pod all agree that pod holds token, and
// returns the agreed FencedLease.
func expectHolder(ns, name, pod string, token int64) *fencingv1.FencedLease {
	GinkgoHelper()
	var fl *fencingv1.FencedLease
	Eventually(func(g Gomega) {
		fl = &fencingv1.FencedLease{}
		g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, fl)).To(Succeed())
		g.Expect(fl.Status.Holder).NotTo(BeNil())
		g.Expect(fl.Status.Holder.PodName).To(Equal(pod))
		g.Expect(fl.Status.Holder.Token).To(Equal(token))
		g.Expect(fl.Status.FencingToken).To(Equal(token))

		l := getLease(g, ns, name)
		g.Expect(l.Spec.HolderIdentity).To(HaveValue(Equal(pod)))
		g.Expect(l.Annotations).To(HaveKeyWithValue(fencingv1.TokenAnnotation, strconv.FormatInt(token, 10)))
		g.Expect(l.Annotations).To(HaveKeyWithValue(fencingv1.HolderUIDAnnotation, string(fl.Status.Holder.PodUID)))
		g.Expect(l.Labels).To(HaveKeyWithValue(fencingv1.LeaseLabel, name))

		p := getPod(g, ns, pod)
		g.Expect(p.UID).To(Equal(fl.Status.Holder.PodUID))
		g.Expect(p.Annotations).To(HaveKeyWithValue(fencingv1.TokenAnnotation, strconv.FormatInt(token, 10)))
		g.Expect(p.Annotations).To(HaveKeyWithValue(fencingv1.StateAnnotation, string(fencingv1.PodHolding)))
		g.Expect(p.Spec.SchedulingGates).To(BeEmpty())
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	return fl
}

// expectWaiting asserts a pod was never granted: still gated, state Waiting, no token.
func expectWaiting(g Gomega, ns, pod string) {
	p := getPod(g, ns, pod)
	g.Expect(p.Annotations).NotTo(HaveKey(fencingv1.TokenAnnotation))
	g.Expect(p.Annotations).To(HaveKeyWithValue(fencingv1.StateAnnotation, string(fencingv1.PodWaiting)))
	g.Expect(p.Spec.SchedulingGates).To(ContainElement(corev1.PodSchedulingGate{Name: fencingv1.SchedulingGate}))
}

// renew does what a holder does: bump RenewTime with the resourceVersion it read.
// It returns the time of the write, taken before the write was sent.
func renew(ns, name string) time.Time {
	GinkgoHelper()
	at, err := tryRenew(ns, name)
	Expect(err).To(Succeed())
	return at
}

// tryRenew is renew, returning the write's error.
func tryRenew(ns, name string) (time.Time, error) {
	l := &coordinationv1.Lease{}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, l); err != nil {
		return time.Time{}, err
	}
	at := time.Now()
	l.Spec.RenewTime = &metav1.MicroTime{Time: at}
	return at, k8s.Update(ctx, l)
}

// keepRenewing renews every interval until the returned stop is called; it plays the
// holder's part, it does not wait for the controller.
func keepRenewing(ns, name string, interval time.Duration) (stop func()) {
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(stopped)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				// A renewal that raced the controller's write to the Lease is tried again
				// at the next tick, as a holder's agent does.
				if _, err := tryRenew(ns, name); !apierrors.IsConflict(err) {
					Expect(err).To(Succeed())
				}
			}
		}
	}()
	return func() { close(done); <-stopped }
}

func setPhase(ns, name string, phase corev1.PodPhase) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		p := getPod(g, ns, name)
		p.Status.Phase = phase
		g.Expect(k8s.Status().Update(ctx, p)).To(Succeed())
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
}

func deletePod(ns, name string) {
	GinkgoHelper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	Expect(k8s.Delete(ctx, p, client.GracePeriodSeconds(0))).To(Succeed())
}

// metric returns the value of a counter, gauge, or (as its sample count) histogram
// series whose labels include want.
func metric(reg *prometheus.Registry, name string, want map[string]string) float64 {
	GinkgoHelper()
	found := 0.0
	eachSeries(reg, name, func(have map[string]string, value float64) bool {
		for k, v := range want {
			if have[k] != v {
				return true
			}
		}
		found = value
		return false
	})
	return found
}

// eachSeries calls fn with the labels and value of each series of metric name in g (a
// histogram's value is its sample count), until fn returns false.
func eachSeries(g prometheus.Gatherer, name string, fn func(labels map[string]string, value float64) bool) {
	GinkgoHelper()
	families, err := g.Gather()
	Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := testenv.Labels(m)
			value := 0.0
			switch {
			case m.Counter != nil:
				value = m.Counter.GetValue()
			case m.Gauge != nil:
				value = m.Gauge.GetValue()
			case m.Histogram != nil:
				value = float64(m.Histogram.GetSampleCount())
			}
			if !fn(labels, value) {
				return
			}
		}
	}
}
