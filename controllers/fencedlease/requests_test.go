package fencedlease_test

import (
	"fmt"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// requestCounter counts a manager's requests to the API server by method and path,
// watches left out (they are set up once, not per renewal).
type requestCounter struct {
	rt http.RoundTripper

	mu       sync.Mutex
	counting bool
	seen     map[string]int
}

func (c *requestCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Query().Get("watch") != "true" {
		c.mu.Lock()
		if c.counting {
			c.seen[r.Method+" "+r.URL.Path]++
		}
		c.mu.Unlock()
	}
	return c.rt.RoundTrip(r)
}

func (c *requestCounter) start() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counting, c.seen = true, map[string]int{}
}

// awaitEvents waits until n events were sent: they leave the recorder asynchronously.
func (c *requestCounter) awaitEvents(n int) {
	GinkgoHelper()
	Eventually(func() int {
		c.mu.Lock()
		defer c.mu.Unlock()
		_, events := writes(c.seen)
		return sum(events)
	}).WithTimeout(timeout).WithPolling(poll).Should(BeNumerically(">=", n))
}

// startWhenQuiet starts counting once the manager has sent nothing for a second: a request
// that an earlier step queued (the echo of its own write, a requeue while the cache catches
// up, an idle FencedLease asking the API server for a foreign Lease) is not the counted
// step's.
func (c *requestCounter) startWhenQuiet() {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		c.start()
		g.Consistently(c.requests).WithTimeout(time.Second).WithPolling(poll).Should(BeZero())
	}).WithTimeout(timeout).Should(Succeed())
}

// requests is how many requests were counted so far.
func (c *requestCounter) requests() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return sum(c.seen)
}

// writes is how many writes (events included) were counted so far.
func (c *requestCounter) writes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	objects, events := writes(c.seen)
	return sum(objects) + sum(events)
}

func (c *requestCounter) stop() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counting = false
	return c.seen
}

var _ = Describe("Requests per renewal (issue 10)", func() {
	It("sends no request at all while a holder renews", func() {
		ns := newNamespace()
		counter := &requestCounter{}
		startController(ns, controllerOpts{id: "counted", wrap: func(rt http.RoundTripper) http.RoundTripper {
			counter.rt = rt
			return counter
		}})
		createFL(ns, "invoices", 2, fencingv1.DeletePodPolicy)
		createPod(ns, "a", "invoices")
		expectHolder(ns, "invoices", "a", 1)
		renew(ns, "invoices") // started: from here on only renewals happen

		const window, interval = 4 * time.Second, 100 * time.Millisecond
		Eventually(func() bool { return getFL(ns, "invoices").Status.Holder.FirstRenewTime != nil }).
			WithTimeout(10*time.Second).WithPolling(20*time.Millisecond).Should(BeTrue(), "the first renewal recorded")
		counter.start()
		stopRenewing := keepRenewing(ns, "invoices", interval)
		time.Sleep(window)
		stopRenewing()
		seen := counter.stop()

		renewals := int(window / interval)
		total := 0
		for _, n := range seen {
			total += n
		}
		GinkgoWriter.Printf("%d renewals: operator requests %v (%.3f per renewal)\n", renewals, seen, float64(total)/float64(renewals))
		lease := fmt.Sprintf("/apis/coordination.k8s.io/v1/namespaces/%s/leases/invoices", ns)
		status := fmt.Sprintf("/apis/fencing.fencedlease.io/v1alpha1/namespaces/%s/fencedleases/invoices/status", ns)
		Expect(seen).NotTo(HaveKey("GET "+lease), "the Lease is followed from the cache")
		Expect(seen).To(BeEmpty(), "no request at all while only renewals happen (status %s)", status)
		Expect(getFL(ns, "invoices").Status.Holder.PodName).To(Equal("a"))
	})

	It("sends no request at all while the holders of a FencedLease's three slots renew (issue 49)", func() {
		ns := newNamespace()
		counter := &requestCounter{}
		startController(ns, controllerOpts{id: "counted", wrap: func(rt http.RoundTripper) http.RoundTripper {
			counter.rt = rt
			return counter
		}})
		createSlotsFL(ns, "invoices", 2, 3)
		for _, p := range []string{"a", "b", "c"} {
			createPod(ns, p, "invoices")
		}
		leases := []string{"invoices", "invoices-slot-1", "invoices-slot-2"}
		for i, p := range []string{"a", "b", "c"} {
			expectSlot(ns, "invoices", int32(i), p, int64(i+1))
			renew(ns, leases[i])
		}
		Eventually(func(g Gomega) {
			for _, s := range getFL(ns, "invoices").Status.Slots {
				g.Expect(s.Holder.FirstRenewTime).NotTo(BeNil(), "slot %d's first renewal recorded", s.Slot)
			}
		}).WithTimeout(10 * time.Second).WithPolling(20 * time.Millisecond).Should(Succeed())

		const window, interval = 4 * time.Second, 100 * time.Millisecond
		counter.start()
		var stops []func()
		for _, l := range leases {
			stops = append(stops, keepRenewing(ns, l, interval))
		}
		time.Sleep(window)
		for _, stop := range stops {
			stop()
		}
		seen := counter.stop()
		GinkgoWriter.Printf("%d renewals: operator requests %v\n", 3*int(window/interval), seen)
		Expect(seen).To(BeEmpty(), "no request at all while only renewals happen")
		Expect(getFL(ns, "invoices").Status.Holding).To(Equal("3/3"))
	})

	// R2: once the status records the first renewal, a renewal is observed as its Lease
	// event arrives and queues no reconcile; the pass the expiry timer brings judges the
	// grant on that observation, so the revocation still counts from the last renewal.
	It("reconciles a settled grant about once a lease, not once a renewal, and still revokes a lease after the last renewal", func() {
		ns := newNamespace()
		startController(ns, controllerOpts{id: "observer"})
		const duration = 2 * time.Second
		createFL(ns, "invoices", 2, fencingv1.DeletePodPolicy)
		createPod(ns, "a", "invoices")
		createPod(ns, "b", "invoices")
		expectHolder(ns, "invoices", "a", 1)
		renew(ns, "invoices")
		Eventually(func() bool { return getFL(ns, "invoices").Status.Holder.FirstRenewTime != nil }).
			WithTimeout(10*time.Second).WithPolling(20*time.Millisecond).Should(BeTrue(), "the first renewal recorded")
		// The pass that recorded it, and its echo's, are over: no reconcile for 300 ms.
		Eventually(func(g Gomega) {
			n := reconcilesDone()
			g.Consistently(reconcilesDone).WithTimeout(300 * time.Millisecond).WithPolling(50 * time.Millisecond).Should(Equal(n))
		}).WithTimeout(timeout).Should(Succeed())

		const window, interval = 3 * time.Second, 100 * time.Millisecond
		before := reconcilesDone()
		stopRenewing := keepRenewing(ns, "invoices", interval)
		time.Sleep(window)
		stopRenewing()
		lastRenew := renew(ns, "invoices")
		passes := reconcilesDone() - before
		renewals := int(window / interval)
		GinkgoWriter.Printf("%d renewals: %d reconciles\n", renewals, passes)
		// About one pass per lease duration (its expiry timer); a pass per renewal was 30.
		Expect(passes).To(BeNumerically("<=", renewals/4), "reconciles while a settled grant renews")

		fl := expectHolder(ns, "invoices", "b", 2)
		late := fl.Status.LastRevocation.Time.Sub(lastRenew)
		GinkgoWriter.Printf("last renewal → revocation: %v (duration %v)\n", late, duration)
		Expect(fl.Status.LastRevocation.Reason).To(Equal(fencingv1.ReasonLeaseExpired))
		Expect(late).To(BeNumerically(">=", duration), "revoked before the lease had run out from the last renewal")
		Expect(late).To(BeNumerically("<", duration+time.Second), "the last renewals were not counted when they arrived")
	})
})

// reconcilesDone is how many reconciles of the FencedLease controller this test process
// has finished without error, from controller-runtime's metrics (one manager runs at a
// time here; it also hears of pods in other specs' namespaces, which it fails to reconcile
// as outside its cache: those are left out).
func reconcilesDone() int {
	GinkgoHelper()
	n := 0.0
	eachSeries(ctrlmetrics.Registry, "controller_runtime_reconcile_total", func(labels map[string]string, value float64) bool {
		if labels["controller"] == "fencedlease" && labels["result"] != "error" {
			n += value
		}
		return true
	})
	return int(n)
}

// writes are the counted requests that change something, events apart.
func writes(seen map[string]int) (objects, events map[string]int) {
	objects, events = map[string]int{}, map[string]int{}
	for k, n := range seen {
		switch {
		case strings.HasPrefix(k, "GET "):
		case strings.HasSuffix(path.Dir(k), "/events") || strings.HasSuffix(k, "/events"):
			events[k] += n
		default:
			objects[k] += n
		}
	}
	return objects, events
}

func sum(m map[string]int) int {
	n := 0
	for _, c := range m {
		n += c
	}
	return n
}

var _ = Describe("Writes per grant and per failover (issue 10)", func() {
	var (
		ns      string
		counter *requestCounter
	)
	BeforeEach(func() {
		ns = newNamespace()
		counter = &requestCounter{}
		startController(ns, controllerOpts{id: "counted", wrap: func(rt http.RoundTripper) http.RoundTripper {
			counter.rt = rt
			return counter
		}})
	})

	It("grants an idle FencedLease with three writes, its first renewal included: the Lease first, then the pod, and one status write", func() {
		createFL(ns, "invoices", 5, fencingv1.DeletePodPolicy)
		Eventually(func() []string { return getFL(ns, "invoices").Finalizers }).WithTimeout(timeout).Should(ContainElement(fencingv1.Finalizer))
		Eventually(func() []metav1.Condition { return getFL(ns, "invoices").Status.Conditions }).WithTimeout(timeout).
			ShouldNot(BeEmpty(), "the Lease-less FencedLease has its first status")

		counter.startWhenQuiet()
		createPod(ns, "a", "invoices")
		Eventually(func(g Gomega) {
			g.Expect(getLease(g, ns, "invoices").Spec.HolderIdentity).To(HaveValue(Equal("a")))
		}).WithTimeout(timeout).Should(Succeed())
		renew(ns, "invoices") // a's first renewal, as pkg/holder sends it on the grant
		expectHolder(ns, "invoices", "a", 1)
		Expect(getFL(ns, "invoices").Status.Holder.FirstRenewTime).NotTo(BeNil(), "the grant and its first renewal in one status write")
		counter.awaitEvents(2)
		Consistently(counter.writes).WithTimeout(time.Second).WithPolling(poll).Should(Equal(counter.writes()))
		seen := counter.stop()
		objects, events := writes(seen)
		GinkgoWriter.Printf("grant: writes %v, events %v, requests %v\n", objects, events, seen)
		Expect(seen).NotTo(HaveKey("GET /apis/coordination.k8s.io/v1/namespaces/"+ns+"/leases/invoices"),
			"no read of the Lease before its creation: the creation fails if one exists")
		Expect(sum(objects)).To(Equal(3), "the Lease, the pod, the status: %v", objects)
		Expect(objects["POST /apis/coordination.k8s.io/v1/namespaces/"+ns+"/leases"]).To(Equal(1), "the Lease created: %v", objects)
		Expect(objects["PUT /apis/fencing.fencedlease.io/v1alpha1/namespaces/"+ns+"/fencedleases/invoices/status"]).To(Equal(1), "one status write: %v", objects)
		Expect(sum(events)).To(Equal(2), "one Granted event on the FencedLease and one on the pod: %v", events)
	})

	// grantNew creates a FencedLease with finalizers right after its pod, as applied
	// together (the pod waits less than W2's grace: no FencedLeaseNotFound condition is
	// written), and counts the operator's writes until the pod holds, has renewed once and
	// nothing more is due.
	grantNew := func(finalizers []string) (objects, events map[string]int) {
		GinkgoHelper()
		counter.startWhenQuiet()
		createPod(ns, "a", "invoices")
		fl := &fencingv1.FencedLease{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "invoices", Finalizers: finalizers},
			Spec:       fencingv1.FencedLeaseSpec{LeaseDurationSeconds: 5, StartupDeadlineSeconds: 5},
		}
		Expect(k8s.Create(ctx, fl)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(getLease(g, ns, "invoices").Spec.HolderIdentity).To(HaveValue(Equal("a")))
		}).WithTimeout(timeout).Should(Succeed())
		renew(ns, "invoices")
		expectHolder(ns, "invoices", "a", 1)
		counter.awaitEvents(2)
		Consistently(counter.writes).WithTimeout(time.Second).WithPolling(poll).Should(Equal(counter.writes()))
		objects, events = writes(counter.stop())
		GinkgoWriter.Printf("new FencedLease with finalizers %v: writes %v, events %v\n", finalizers, objects, events)
		Expect(getFL(ns, "invoices").Finalizers).To(Equal([]string{fencingv1.Finalizer}))
		return objects, events
	}

	It("grants a new FencedLease that carries its finalizer from its creation (the webhook install's FencedLease webhook) with the grant's three writes alone", func() {
		objects, events := grantNew([]string{fencingv1.Finalizer})
		Expect(objects).NotTo(HaveKey("PUT /apis/fencing.fencedlease.io/v1alpha1/namespaces/"+ns+"/fencedleases/invoices"),
			"no metadata write: the finalizer came with the creation")
		Expect(sum(objects)).To(Equal(3), "the Lease, the pod, the status: %v", objects)
		Expect(sum(events)).To(Equal(2), "%v", events)
	})

	It("grants a new FencedLease created as written (the default install: no webhook puts the finalizer on) with one write more, the finalizer's", func() {
		objects, events := grantNew(nil)
		Expect(objects).To(HaveKeyWithValue("PUT /apis/fencing.fencedlease.io/v1alpha1/namespaces/"+ns+"/fencedleases/invoices", 1),
			"one metadata write: the finalizer")
		Expect(sum(objects)).To(Equal(4), "the finalizer, the Lease, the pod, the status: %v", objects)
		Expect(sum(events)).To(Equal(2), "%v", events)
	})

	// failOver lets holder a of a FencedLease under policy stop renewing while b waits, and
	// counts the operator's writes until b holds token 2, has renewed once and the status
	// records it, and nothing more is due.
	failOver := func(policy fencingv1.RevocationPolicy) (objects, events map[string]int) {
		GinkgoHelper()
		createFL(ns, "invoices", 2, policy)
		createPod(ns, "a", "invoices")
		expectHolder(ns, "invoices", "a", 1)
		renew(ns, "invoices")
		createPod(ns, "b", "invoices")
		Eventually(func() int32 { return getFL(ns, "invoices").Status.Waiting }).WithTimeout(timeout).Should(BeEquivalentTo(1))

		counter.start() // a stops renewing now
		Eventually(func(g Gomega) {
			g.Expect(getLease(g, ns, "invoices").Spec.HolderIdentity).To(HaveValue(Equal("b")))
		}).WithTimeout(timeout).Should(Succeed())
		renew(ns, "invoices") // b's first renewal, as pkg/holder sends it on the grant
		expectHolder(ns, "invoices", "b", 2)
		Eventually(func() *metav1.MicroTime {
			return getFL(ns, "invoices").Status.Holder.FirstRenewTime
		}).WithTimeout(timeout).ShouldNot(BeNil())
		if policy == fencingv1.KeepPodPolicy {
			Eventually(func(g Gomega) {
				a := getPod(g, ns, "a")
				g.Expect(a.Annotations).To(HaveKeyWithValue(fencingv1.StateAnnotation, string(fencingv1.PodRevoked)))
				g.Expect(a.Labels).NotTo(HaveKey(fencingv1.HolderLabel))
			}).WithTimeout(timeout).Should(Succeed())
		} else {
			Eventually(func() bool { return podGone(ns, "a") }).WithTimeout(timeout).Should(BeTrue())
		}
		counter.awaitEvents(2)
		// Nothing more is due: a late write (a second status write, say) would show here.
		Consistently(counter.writes).WithTimeout(time.Second).WithPolling(poll).Should(Equal(counter.writes()))
		objects, events = writes(counter.stop())
		GinkgoWriter.Printf("failover (%s): writes %v, events %v\n", policy, objects, events)
		pods := "/api/v1/namespaces/" + ns + "/pods/"
		Expect(objects["PUT /apis/coordination.k8s.io/v1/namespaces/"+ns+"/leases/invoices"]).To(Equal(1), "one Lease write: %v", objects)
		Expect(objects["PUT /apis/fencing.fencedlease.io/v1alpha1/namespaces/"+ns+"/fencedleases/invoices/status"]).To(Equal(1), "one status write: %v", objects)
		Expect(objects["PATCH "+pods+"b"]).To(Equal(1), "b's token, state, holder label and gate in one patch: %v", objects)
		Expect(objects["PATCH "+pods+"a"]).To(Equal(1), "a marked Revoked, its holder label off, in one patch: %v", objects)
		Expect(sum(events)).To(Equal(2), "the transition on the FencedLease, Granted on b: %v", events)
		list := &eventsv1.EventList{}
		Expect(k8s.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		var told []string
		for _, e := range list.Items {
			told = append(told, e.Regarding.Kind+"/"+e.Regarding.Name+" "+e.Type+" "+e.Reason+": "+e.Note)
		}
		Expect(told).To(ContainElements(
			HavePrefix("FencedLease/invoices Warning Revoked: revoked token 1 of pod a: LeaseExpired"),
			"Pod/b Normal Granted: granted token 2 to pod b"))
		Expect(told).To(ContainElement(And(HavePrefix("FencedLease/invoices Warning Revoked: revoked token 1"),
			HaveSuffix("; then granted token 2 to pod b"))), "one event on the FencedLease for both halves")
		return objects, events
	}

	It("fails over with five writes and two events under DeletePod, b's first renewal included: one Lease write moves the grant, one status write records it, one event on each side tells it", func() {
		objects, _ := failOver(fencingv1.DeletePodPolicy)
		// The hand-over's compare-and-swap on the Lease (a's grant ended and b's made in one
		// write), b's pod, a's mark then delete (a terminating pod keeps its labels: the
		// mark takes the holder label off first), and one status write for the revocation,
		// the grant and b's first renewal (b's renewal is the test's, not counted).
		Expect(sum(objects)).To(Equal(5), "%v", objects)
		Expect(objects["DELETE /api/v1/namespaces/"+ns+"/pods/a"]).To(Equal(1), "%v", objects)
	})

	It("fails over with four writes and two events under KeepPod: the old pod is marked in one write and kept", func() {
		objects, _ := failOver(fencingv1.KeepPodPolicy)
		Expect(sum(objects)).To(Equal(4), "the Lease, b's pod, a's mark, the status: %v", objects)
		Expect(objects).NotTo(HaveKey("DELETE /api/v1/namespaces/"+ns+"/pods/a"), "KeepPod keeps a")
	})
})
