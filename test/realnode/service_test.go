package realnode

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// testWarmService: a three-replica Warm Deployment under hold behind a Service selecting
// the holder label. Requests through the ClusterIP reach the holder only; after the
// holder's container is frozen, the Service answers from the new holder (the time from
// the freeze to its first answer is measured and logged).
func testWarmService(t *testing.T) {
	const ns, lease, leaseSeconds = "service", "leader", 4
	newNamespace(t, ns)
	ctx := context.Background()
	must(t, rc.Client.Create(ctx, &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: lease},
		Spec: fencingv1.FencedLeaseSpec{LeaseDurationSeconds: leaseSeconds, StartupDeadlineSeconds: 60, Standby: fencingv1.StandbyWarm}}))
	grants, err := testenvWatch(ns)
	must(t, err)
	template := workloadPod(ns, "", lease, holdContainer("server"))
	c := &template.Spec.Containers[0]
	c.Ports = []corev1.ContainerPort{{ContainerPort: 8080}}
	// Ready once hold runs the server, which it does only once granted.
	c.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(8080)}},
		PeriodSeconds: 1, FailureThreshold: 1}
	template.Labels["app"] = "leader"
	must(t, rc.Client.Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "leader"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "leader"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: template.ObjectMeta, Spec: template.Spec}}}))
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "leader"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "leader", fencingv1.HolderLabel: "true"},
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
	must(t, rc.Client.Create(ctx, svc))
	url := fmt.Sprintf("http://%s/", svc.Spec.ClusterIP)
	httpc := &http.Client{Timeout: 500 * time.Millisecond}
	ask := func() string {
		resp, err := httpc.Get(url)
		if err != nil {
			return ""
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return strings.TrimSpace(string(body))
	}
	holder := func() string {
		fl := &fencingv1.FencedLease{}
		if rc.Client.Get(ctx, clientKey(ns, lease), fl) != nil || fl.Status.Holder == nil {
			return ""
		}
		return fl.Status.Holder.PodName
	}
	var first string
	if err := poll(2*time.Minute, func() bool { first = ask(); return first != "" && first == holder() }); err != nil {
		t.Fatalf("the Service never answered from the holder (%q, holder %q)", first, holder())
	}
	for range 20 {
		if got := ask(); got != first {
			t.Fatalf("the Service answered %q, not the holder %s", got, first)
		}
	}
	must(t, rc.Freeze(startedPod(t, ns, first, "server"), "server"))
	frozen := time.Now()
	renewed := lastRenewal(t, ns, lease)
	t.Cleanup(func() {
		if p := getPodOrNil(ns, first); p != nil {
			_ = rc.Thaw(p, "server")
		}
	})
	var next string
	if err := poll(2*time.Minute, func() bool { next = ask(); return next != "" && next != first }); err != nil {
		t.Fatalf("the Service never answered from a new holder after %s was frozen", first)
	}
	answered := time.Now()
	gap := answered.Sub(frozen)
	measured("Warm failover to work (last renewal → Service answers from the next)", "%v (lease %ds)",
		answered.Sub(renewed).Round(10*time.Millisecond), leaseSeconds)
	if h := holder(); next != h {
		t.Errorf("after the freeze the Service answered from %s, but the holder is %q", next, h)
	}
	for range 20 {
		if got := ask(); got != next {
			t.Errorf("after the failover the Service answered %q, not the holder %s", got, next)
		}
	}
	t.Logf("Service failover: frozen holder %s → first answer from new holder %s after %v (lease %ds)", first, next, gap.Round(10*time.Millisecond), leaseSeconds)
	if p := getPodOrNil(ns, first); p != nil {
		_ = rc.Thaw(p, "server")
	}
	if _, err := grants.Stop(); err != nil {
		t.Errorf("grant oracle: %v", err)
	}
}
