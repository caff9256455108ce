// Command undeploy removes fencedlease from the cluster in KUBECONFIG in the one order
// that keeps holders safe (make undeploy runs it):
//
//  1. every FencedLease, while the operator still runs: it revokes each holder (with
//     DeletePod, deletes its pod) and then lets the FencedLease go. The Leases stay, as the
//     tombstones that keep tokens rising if fencedlease is installed again.
//  2. the rest of the bundle but the CRD: the pod webhook first (with no operator behind
//     it every call would wait out its timeout), the operator, its RBAC, the admission
//     policies, its namespace.
//  3. the CRD.
//
// Deleting the namespace or the CRD first instead would stop the operator while
// FencedLeases still carry its finalizer: they would hang, and their holders would go on
// without a lease that anyone revokes.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/hack/manifest"
)

func main() {
	bundle := flag.String("f", "dist/install.yaml", "The install bundle to remove.")
	timeout := flag.Duration("timeout", 5*time.Minute, "How long to wait for the operator to finish each FencedLease.")
	flag.Parse()
	if err := run(*bundle, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "undeploy:", err)
		os.Exit(1)
	}
}

func run(bundle string, timeout time.Duration) error {
	objs, err := manifest.Read(bundle)
	if err != nil {
		return err
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	s := scheme.Scheme
	if err := fencingv1.AddToScheme(s); err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		return err
	}
	return undeploy(context.Background(), c, objs, options{timeout: timeout, out: os.Stdout})
}
