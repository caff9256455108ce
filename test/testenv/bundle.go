package testenv

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fencedlease/fencedlease/hack/manifest"
)

// OperatorUser is the operator's user as dist/install.yaml deploys it.
const OperatorUser = "system:serviceaccount:fencedlease-system:fencedlease-controller-manager"

// OperatorGroups are OperatorUser's groups (but system:authenticated).
var OperatorGroups = []string{"system:serviceaccounts", "system:serviceaccounts:fencedlease-system"}

// BundleObjects reads dist/install.yaml, the install bundle as shipped, and returns its
// objects whose kind is not in skip, in the bundle's order.
func BundleObjects(skip ...string) ([]*unstructured.Unstructured, error) {
	objs, err := manifest.Read(filepath.Join(RepoRoot(), "dist", "install.yaml"))
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(objs, func(u *unstructured.Unstructured) bool { return slices.Contains(skip, u.GetKind()) }), nil
}

// InstallBundle creates the bundle's objects but those of the kinds in skip.
func InstallBundle(ctx context.Context, c client.Client, skip ...string) error {
	objs, err := BundleObjects(skip...)
	if err != nil {
		return err
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			return fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	return nil
}

// AsUser is cfg acting as user (impersonation), in groups besides system:authenticated;
// extra carries what a bound service account token adds (the pod's name and UID).
func AsUser(cfg *rest.Config, user string, groups []string, extra map[string][]string) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: append(groups, "system:authenticated"), Extra: extra}
	return c
}

// AsOperator is cfg acting as the operator's service account, as the bundle deploys it:
// its RBAC and the admission policies' exemption are the shipped ones.
func AsOperator(cfg *rest.Config) *rest.Config {
	return AsUser(cfg, OperatorUser, OperatorGroups, nil)
}
