package admissioncheck

import (
	"context"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
)

const (
	// CandidatePolicy is the MutatingAdmissionPolicy, bound by a binding of the same name,
	// that admits candidate pods inside the API server (Kubernetes 1.36 and newer).
	CandidatePolicy = "fencedlease-candidate"
	// CandidateCheck is the ValidatingAdmissionPolicy that refuses a labeled pod that was
	// not admitted as a candidate; it exempts no one, so it takes no parameter.
	CandidateCheck = "fencedlease-candidate-check"
	// AgentImageParamKey is the key of the parameter ConfigMap that names the agent image
	// CandidatePolicy injects.
	AgentImageParamKey = "agentImage"
)

// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingadmissionpolicies;mutatingadmissionpolicybindings;mutatingwebhookconfigurations,verbs=get

// candidateAdmission says what admits candidate pods — CandidatePolicy, or the pod
// webhook of MutatingWebhookConfiguration c.WebhookConfiguration — or what is wrong.
func (c *Checker) candidateAdmission(ctx context.Context) (by, problem string) {
	policyProblem := c.candidatePolicyProblem(ctx)
	if policyProblem == "" {
		return "MutatingAdmissionPolicy " + CandidatePolicy, ""
	}
	if c.WebhookConfiguration != "" {
		hook := &admissionregistrationv1.MutatingWebhookConfiguration{}
		err := c.Client.Get(ctx, types.NamespacedName{Name: c.WebhookConfiguration}, hook)
		if err == nil {
			for _, w := range hook.Webhooks {
				if admitsPods(w) {
					return "the pod webhook of MutatingWebhookConfiguration " + c.WebhookConfiguration, ""
				}
			}
		}
	}
	return "", policyProblem + ", and no pod webhook admits them: every labeled pod is refused (fencedlease-candidate-check)"
}

// candidatePolicyProblem says what is wrong with CandidatePolicy, or "".
func (c *Checker) candidatePolicyProblem(ctx context.Context) string {
	p := &admissionregistrationv1.MutatingAdmissionPolicy{}
	if err := c.Client.Get(ctx, types.NamespacedName{Name: CandidatePolicy}, p); err != nil {
		if meta.IsNoMatchError(err) {
			return "this cluster has no MutatingAdmissionPolicy (Kubernetes 1.36 and newer)"
		}
		return fmt.Sprintf("MutatingAdmissionPolicy %s: %v", CandidatePolicy, err)
	}
	b := &admissionregistrationv1.MutatingAdmissionPolicyBinding{}
	if err := c.Client.Get(ctx, types.NamespacedName{Name: CandidatePolicy}, b); err != nil {
		return fmt.Sprintf("MutatingAdmissionPolicyBinding %s: %v", CandidatePolicy, err)
	}
	if b.Spec.PolicyName != CandidatePolicy {
		return fmt.Sprintf("MutatingAdmissionPolicyBinding %s binds policy %q, not %q", CandidatePolicy, b.Spec.PolicyName, CandidatePolicy)
	}
	ref := b.Spec.ParamRef
	if ref == nil || ref.Name == "" {
		return fmt.Sprintf("MutatingAdmissionPolicyBinding %s names no parameter object: the policy has no agent image", CandidatePolicy)
	}
	params, problem := c.params(ctx, ref, CandidatePolicy)
	if problem != "" {
		return problem
	}
	if got := params.Data[AgentImageParamKey]; c.AgentImage != "" && got != c.AgentImage {
		return fmt.Sprintf("parameter ConfigMap %s/%s names the agent image %q, but this operator was given %q: pods asking for the agent get the parameter's",
			ref.Namespace, ref.Name, got, c.AgentImage)
	}
	return ""
}

// admitsPods: webhook w is called on the creation of pods.
func admitsPods(w admissionregistrationv1.MutatingWebhook) bool {
	for _, r := range w.Rules {
		for _, res := range r.Resources {
			for _, op := range r.Operations {
				if (res == "pods" || res == "*") && (op == admissionregistrationv1.Create || op == admissionregistrationv1.OperationAll) {
					return true
				}
			}
		}
	}
	return false
}
