package admissioncheck

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// Policies are the shipped ValidatingAdmissionPolicies the operator relies on, each
// bound by a binding of the same name (config/policy). Candidate admission, by the
// MutatingAdmissionPolicy CandidatePolicy or the pod webhook, is checked besides.
var Policies = []string{
	"fencedlease-holder-label",
	"fencedlease-holder-lease",
	"fencedlease-lease-create",
	"fencedlease-pod",
	"fencedlease-status",
	"fencedlease-revoke-request",
	CandidateCheck,
}

// OperatorParamKey is the key of the policies' parameter ConfigMap that names the
// operator's user.
const OperatorParamKey = "operator"

// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingadmissionpolicies;validatingadmissionpolicybindings,verbs=get

// Checker checks the policies when the manager starts, and again every Interval.
type Checker struct {
	// Client reads uncached and creates the SelfSubjectReview that tells who we are.
	Client   client.Client
	Recorder events.EventRecorder
	// Regarding is what events are about: the operator's pod when known. Without it an
	// event is about the policy at fault.
	Regarding runtime.Object
	Metrics   *Metrics
	Interval  time.Duration
	// AgentImage is the agent image this operator was given; the candidate policy's
	// parameter must name the same ("": not compared).
	AgentImage string
	// WebhookConfiguration names the MutatingWebhookConfiguration of the pod webhook,
	// which admits candidates where CandidatePolicy is not in place ("": none).
	WebhookConfiguration string

	reported map[string]string // policy → problem last reported, to report a change once
}

// Start implements manager.Runnable.
func (c *Checker) Start(ctx context.Context) error {
	if c.Interval <= 0 {
		c.Interval = 5 * time.Minute
	}
	for {
		c.Check(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(c.Interval):
		}
	}
}

// Check looks at every policy once and reports what is wrong; it returns the problems
// by policy (empty when all is well).
func (c *Checker) Check(ctx context.Context) map[string]string {
	log := logf.FromContext(ctx).WithName("admission-check")
	me, err := c.whoAmI(ctx)
	problems := map[string]string{}
	for _, name := range Policies {
		p := ""
		if err != nil {
			p = fmt.Sprintf("cannot tell which user this operator is: %v", err)
		} else {
			p = c.problem(ctx, name, me)
		}
		c.report(log, name, p, "")
		if p != "" {
			problems[name] = p
		}
	}
	by, p := c.candidateAdmission(ctx)
	c.report(log, CandidatePolicy, p, by)
	if p != "" {
		problems[CandidatePolicy] = p
	}
	return problems
}

// report sets policy's gauge, and logs (with an event when wrong) what changed since the
// last report: problem, or by what it is in place ("" for the policy itself).
func (c *Checker) report(log logr.Logger, policy, problem, by string) {
	c.Metrics.set(policy, problem == "")
	if last, seen := c.reported[policy]; seen && last == problem+by {
		return
	}
	if c.reported == nil {
		c.reported = map[string]string{}
	}
	c.reported[policy] = problem + by
	if problem == "" {
		log.Info("admission policy in place", "policy", policy, "by", cmp.Or(by, policy))
		return
	}
	log.Error(nil, "admission policy NOT in place: ordinary users can break the grant guarantees, or the operator is denied its own writes, or candidate pods are refused; install config/policy (it is in dist/install.yaml)",
		"policy", policy, "problem", problem)
	c.event(policy, problem)
}

// problem says what is wrong with policy name, or "".
func (c *Checker) problem(ctx context.Context, name, me string) string {
	if err := c.Client.Get(ctx, types.NamespacedName{Name: name}, &admissionregistrationv1.ValidatingAdmissionPolicy{}); err != nil {
		return fmt.Sprintf("ValidatingAdmissionPolicy %s: %v", name, err)
	}
	b := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	if err := c.Client.Get(ctx, types.NamespacedName{Name: name}, b); err != nil {
		return fmt.Sprintf("ValidatingAdmissionPolicyBinding %s: %v", name, err)
	}
	if b.Spec.PolicyName != name {
		return fmt.Sprintf("ValidatingAdmissionPolicyBinding %s binds policy %q, not %q", name, b.Spec.PolicyName, name)
	}
	if name == CandidateCheck {
		return "" // it exempts no one, so it takes no parameter
	}
	ref := b.Spec.ParamRef
	if ref == nil || ref.Name == "" {
		return fmt.Sprintf("ValidatingAdmissionPolicyBinding %s names no parameter object: the policy cannot tell the operator apart", name)
	}
	params, problem := c.params(ctx, ref, name)
	if problem != "" {
		return problem
	}
	if got := params.Data[OperatorParamKey]; got != me {
		return fmt.Sprintf("parameter ConfigMap %s/%s names the operator %q, but this operator runs as %q: the policies will deny its own writes",
			ref.Namespace, ref.Name, got, me)
	}
	return ""
}

// params reads the parameter ConfigMap ref of binding, or says why it cannot.
func (c *Checker) params(ctx context.Context, ref *admissionregistrationv1.ParamRef, binding string) (*corev1.ConfigMap, string) {
	params := &corev1.ConfigMap{}
	if err := c.Client.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, params); err != nil {
		return nil, fmt.Sprintf("parameter ConfigMap %s/%s of binding %s: %v", ref.Namespace, ref.Name, binding, err)
	}
	return params, ""
}

func (c *Checker) whoAmI(ctx context.Context) (string, error) {
	review := &authenticationv1.SelfSubjectReview{}
	if err := c.Client.Create(ctx, review); err != nil {
		return "", err
	}
	return review.Status.UserInfo.Username, nil
}

func (c *Checker) event(policy, problem string) {
	if c.Recorder == nil {
		return
	}
	regarding := c.Regarding
	if regarding == nil {
		p := &admissionregistrationv1.ValidatingAdmissionPolicy{}
		p.Name = policy
		p.APIVersion, p.Kind = "admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy"
		regarding = p
	}
	c.Recorder.Eventf(regarding, nil, corev1.EventTypeWarning, "AdmissionPolicyMissing", "Check",
		"admission policy %s is not in place: %s", policy, problem)
}
