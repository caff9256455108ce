package main

import (
	"bytes"
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/hack/manifest"
	"github.com/fencedlease/fencedlease/test/testenv"
)

// installed starts a control plane with the shipped bundle in it (its fail-closed pod
// webhook left out: nothing serves it here; the admission policies in, exempting the
// operator's service account, which the in-process operator is not) and a client.
func installed(t *testing.T) (client.Client, []*unstructured.Unstructured, func() *testenv.Controller) {
	t.Helper()
	logf.SetLogger(logr.Discard())
	_, cfg, c := testenv.StartT(t)
	objs, err := manifest.Read(filepath.Join(testenv.RepoRoot(), "dist", "install.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, o := range objs {
		// testenv.New installs the CRD itself.
		if slices.Contains([]string{"CustomResourceDefinition", "MutatingWebhookConfiguration", "ValidatingAdmissionPolicyBinding"}, o.GetKind()) {
			continue
		}
		if err := c.Create(ctx, o.DeepCopy()); err != nil {
			t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	waitFor(t, "the CRD to serve", func() bool { return c.List(ctx, &fencingv1.FencedLeaseList{}) == nil })
	start := func() *testenv.Controller {
		op, err := testenv.StartController(cfg, "", testenv.ControllerOptions{Name: "operator"})
		if err != nil {
			t.Fatal(err)
		}
		return op
	}
	return c, objs, start
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true,
		func(context.Context) (bool, error) { return ok(), nil }); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// heldLease creates a FencedLease with one labeled pod and waits until the pod is granted.
func heldLease(t *testing.T, c client.Client, ns string) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "invoices"}}); err != nil {
		t.Fatal(err)
	}
	pod := testenv.CandidatePod(ns, "holder", "invoices")
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the pod to be granted", func() bool {
		return c.Get(ctx, client.ObjectKeyFromObject(pod), pod) == nil && pod.Annotations[fencingv1.StateAnnotation] == string(fencingv1.PodHolding)
	})
	return pod
}

// TestUndeployRevokesHoldersBeforeTheOperatorGoes runs undeploy against the bundle with
// a holder in place: the operator, still running, revokes it and deletes its pod; the
// Lease stays as the token tombstone; then the operator's objects go; the CRD last.
func TestUndeployRevokesHoldersBeforeTheOperatorGoes(t *testing.T) {
	c, objs, start := installed(t)
	op := start()
	pod := heldLease(t, c, "app")
	ctx := context.Background()

	var out bytes.Buffer
	crdDeletedEarly := false
	err := undeploy(ctx, c, objs, options{timeout: 30 * time.Second, out: &out, afterOperator: func() {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		crdDeletedEarly = c.Get(ctx, client.ObjectKey{Name: "fencedleases.fencing.fencedlease.io"}, crd) != nil || crd.DeletionTimestamp != nil
		if err := op.Stop(); err != nil {
			t.Error(err)
		}
	}})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if crdDeletedEarly {
		t.Error("the CRD went before the operator")
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(pod), pod); !apierrors.IsNotFound(err) && pod.DeletionTimestamp == nil {
		t.Errorf("the holder pod was not revoked and deleted (DeletePod): %v, state %q", err, pod.Annotations[fencingv1.StateAnnotation])
	}
	lease := &coordinationv1.Lease{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "app", Name: "invoices"}, lease); err != nil {
		t.Errorf("the Lease, the token tombstone, is gone: %v", err)
	} else if lease.Annotations[fencingv1.TokenAnnotation] != "1" || lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "" {
		t.Errorf("the tombstone should keep token 1 and name no holder: %v %v", lease.Annotations, lease.Spec.HolderIdentity)
	}
	d := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "fencedlease-system", Name: "fencedlease-controller-manager"}, d); !apierrors.IsNotFound(err) {
		t.Errorf("the operator's Deployment is still there: %v", err)
	}
	waitFor(t, "the CRD to go", func() bool {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Name: "fencedleases.fencing.fencedlease.io"}, &apiextensionsv1.CustomResourceDefinition{}))
	})
	t.Logf("undeploy said:\n%s", out.String())
}

// TestUndeployStopsWhenNoOperatorFinishesTheFencedLeases: with the operator not running,
// the FencedLeases cannot be finished; undeploy says so and removes nothing else.
func TestUndeployStopsWhenNoOperatorFinishesTheFencedLeases(t *testing.T) {
	c, objs, start := installed(t)
	op := start()
	heldLease(t, c, "app")
	if err := op.Stop(); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err := undeploy(context.Background(), c, objs, options{timeout: 2 * time.Second, out: &out})
	if err == nil || !strings.Contains(err.Error(), "app/invoices") || !strings.Contains(err.Error(), "is the operator running?") {
		t.Fatalf("want an error naming app/invoices and the operator, got %v", err)
	}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "fencedlease-system", Name: "fencedlease-controller-manager"}, &appsv1.Deployment{}); err != nil {
		t.Errorf("the operator's Deployment was removed with FencedLeases left: %v", err)
	}
}
