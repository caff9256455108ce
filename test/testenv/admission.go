package testenv

import (
	"context"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fencedlease/fencedlease/config/policy"
)

// InstallCandidateAdmission creates the objects of dist/install.yaml that admit candidate
// pods (policy.CandidateAdmissionNames) and waits until the API server admits with them.
func InstallCandidateAdmission(ctx context.Context, c client.Client) error {
	objs, err := BundleObjects()
	if err != nil {
		return err
	}
	objs = slices.DeleteFunc(objs, func(o *unstructured.Unstructured) bool {
		return !slices.Contains(policy.CandidateAdmissionNames, o.GetName())
	})
	if err := policy.Install(ctx, c, objs); err != nil {
		return err
	}
	return policy.WaitUntilCandidatesAdmitted(ctx, c)
}
