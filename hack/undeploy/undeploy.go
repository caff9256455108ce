package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

type options struct {
	timeout time.Duration
	out     io.Writer
	// afterOperator runs once the bundle but the CRD is deleted (tests stop their
	// in-process operator there, as deleting the Deployment stops the real one).
	afterOperator func()
}

// removalOrder ranks kinds for step 2: the fail-closed webhook first, the namespace last.
var removalOrder = []string{"MutatingWebhookConfiguration", "Deployment", "Service", "PodDisruptionBudget"}

func rank(kind string) int {
	if i := slices.Index(removalOrder, kind); i >= 0 {
		return i
	}
	if kind == "Namespace" {
		return len(removalOrder) + 1
	}
	return len(removalOrder)
}

func undeploy(ctx context.Context, c client.Client, objs []*unstructured.Unstructured, o options) error {
	if err := deleteFencedLeases(ctx, c, o); err != nil {
		return err
	}
	var crds, rest []*unstructured.Unstructured
	for _, obj := range objs {
		if obj.GetKind() == "CustomResourceDefinition" {
			crds = append(crds, obj)
		} else {
			rest = append(rest, obj)
		}
	}
	slices.SortStableFunc(rest, func(a, b *unstructured.Unstructured) int { return rank(a.GetKind()) - rank(b.GetKind()) })
	fmt.Fprintf(o.out, "removing the operator: %d objects (webhook first, namespace last)\n", len(rest))
	for _, obj := range rest {
		if err := client.IgnoreNotFound(c.Delete(ctx, obj)); err != nil && !meta.IsNoMatchError(err) {
			return fmt.Errorf("deleting %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
	if o.afterOperator != nil {
		o.afterOperator()
	}
	for _, crd := range crds {
		fmt.Fprintf(o.out, "removing the CRD %s\n", crd.GetName())
		if err := client.IgnoreNotFound(c.Delete(ctx, crd)); err != nil {
			return fmt.Errorf("deleting the CRD %s: %w", crd.GetName(), err)
		}
	}
	return nil
}

// deleteFencedLeases deletes every FencedLease and waits until the operator has revoked
// each holder and let each go. It gives up after the timeout, naming what is left, and
// then nothing else is removed: without the operator those would hang on its finalizer.
func deleteFencedLeases(ctx context.Context, c client.Client, o options) error {
	list := &fencingv1.FencedLeaseList{}
	err := c.List(ctx, list)
	if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
		fmt.Fprintln(o.out, "no FencedLease CRD: nothing to revoke")
		return nil
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(o.out, "deleting %d FencedLeases; the operator revokes their holders\n", len(list.Items))
	for i := range list.Items {
		if err := client.IgnoreNotFound(c.Delete(ctx, &list.Items[i])); err != nil {
			return err
		}
	}
	left := list.Items
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, o.timeout, true, func(ctx context.Context) (bool, error) {
		if err := c.List(ctx, list); err != nil {
			return false, nil // a failed read is not an answer: ask again until the timeout
		}
		left = list.Items
		return len(left) == 0, nil
	})
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var names []string
	for _, fl := range left {
		names = append(names, fl.Namespace+"/"+fl.Name)
	}
	return fmt.Errorf("after %v, %d FencedLeases are still being deleted (%s): is the operator running? "+
		"It must revoke their holders before it goes; nothing else was removed. Start it again, or, to abandon "+
		"the holders, remove the finalizer %s from each and run this again",
		o.timeout, len(left), strings.Join(names, ", "), fencingv1.Finalizer)
}
