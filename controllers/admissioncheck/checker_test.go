package admissioncheck

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

const (
	me         = "system:serviceaccount:ops:fencedlease"
	agentImage = "fencedlease-agent:v1"
)

// installed is every policy in place, bound, with a parameter naming me.
func installed() []client.Object {
	objs := []client.Object{&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "params"},
		Data:       map[string]string{OperatorParamKey: me, AgentImageParamKey: agentImage},
	},
		&admissionregistrationv1.MutatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: CandidatePolicy}},
		&admissionregistrationv1.MutatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: CandidatePolicy},
			Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: CandidatePolicy,
				ParamRef: &admissionregistrationv1.ParamRef{Namespace: "ops", Name: "params"}}},
	}
	for _, name := range Policies {
		objs = append(objs,
			&admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}},
			&admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name,
					ParamRef: &admissionregistrationv1.ParamRef{Namespace: "ops", Name: "params"}}})
	}
	return objs
}

func newChecker(t *testing.T, objs []client.Object) (*Checker, *events.FakeRecorder, *prometheus.Registry) {
	t.Helper()
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if r, ok := obj.(*authenticationv1.SelfSubjectReview); ok {
				r.Status.UserInfo.Username = me // what the API server answers
				return nil
			}
			return c.Create(ctx, obj, opts...)
		},
	}).Build()
	rec := events.NewFakeRecorder(10)
	reg := prometheus.NewRegistry()
	return &Checker{Client: c, Recorder: rec, Metrics: NewMetrics(reg), AgentImage: agentImage, WebhookConfiguration: "hooks"}, rec, reg
}

func TestAllInPlace(t *testing.T) {
	c, rec, reg := newChecker(t, installed())
	if problems := c.Check(context.Background()); len(problems) != 0 {
		t.Fatalf("problems %v", problems)
	}
	if n := testutil.ToFloat64(c.Metrics.ready.WithLabelValues("fencedlease-pod")); n != 1 {
		t.Fatalf("gauge %v, want 1", n)
	}
	if got, _ := testutil.GatherAndCount(reg, "fencedlease_admission_policy_ready"); got != len(Policies)+1 {
		t.Fatalf("%d series, want one per policy and one for candidate admission", got)
	}
	if len(rec.Events) != 0 {
		t.Fatalf("an event with nothing wrong: %s", <-rec.Events)
	}
}

func TestEachProblemIsReportedOnce(t *testing.T) {
	without := func(kind, name string) []client.Object {
		var out []client.Object
		for _, o := range installed() {
			if o.GetName() == name && strings.HasSuffix(strings.ToLower(typeName(o)), kind) {
				continue
			}
			out = append(out, o)
		}
		return out
	}
	withParam := func(mutate func(*corev1.ConfigMap)) []client.Object {
		objs := installed()
		mutate(objs[0].(*corev1.ConfigMap))
		return objs
	}
	withBinding := func(mutate func(*admissionregistrationv1.ValidatingAdmissionPolicyBinding)) []client.Object {
		objs := installed()
		for _, o := range objs {
			if b, ok := o.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding); ok && b.Name == "fencedlease-pod" {
				mutate(b)
			}
		}
		return objs
	}
	for name, tc := range map[string]struct {
		objs     []client.Object
		policies int
		want     string
	}{
		"policy missing": {without("validatingadmissionpolicy", "fencedlease-pod"), 1,
			`ValidatingAdmissionPolicy fencedlease-pod: validatingadmissionpolicies.admissionregistration.k8s.io "fencedlease-pod" not found`},
		"binding missing": {without("validatingadmissionpolicybinding", "fencedlease-pod"), 1,
			`ValidatingAdmissionPolicyBinding fencedlease-pod: validatingadmissionpolicybindings.admissionregistration.k8s.io "fencedlease-pod" not found`},
		"binding of another policy": {withBinding(func(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) { b.Spec.PolicyName = "x" }), 1,
			`ValidatingAdmissionPolicyBinding fencedlease-pod binds policy "x", not "fencedlease-pod"`},
		"candidate policy missing, no pod webhook": {without("mutatingadmissionpolicy", CandidatePolicy), 1,
			"and no pod webhook admits them: every labeled pod is refused (fencedlease-candidate-check)"},
		"candidate policy naming another agent image": {withParam(func(cm *corev1.ConfigMap) { cm.Data[AgentImageParamKey] = "agent:old" }), 1,
			`names the agent image "agent:old", but this operator was given "fencedlease-agent:v1"`},
		"binding without parameter": {withBinding(func(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) { b.Spec.ParamRef = nil }), 1,
			"names no parameter object"},
		"parameter missing": {without("configmap", "params"), len(Policies) - 1 + 1,
			`parameter ConfigMap ops/params of binding fencedlease-holder-lease: configmaps "params" not found`},
		"parameter naming another operator": {withParam(func(cm *corev1.ConfigMap) {
			cm.Data[OperatorParamKey] = "system:serviceaccount:fencedlease-system:fencedlease-controller-manager"
		}), len(Policies) - 1, `names the operator "system:serviceaccount:fencedlease-system:fencedlease-controller-manager", but this operator runs as "system:serviceaccount:ops:fencedlease": the policies will deny its own writes`},
	} {
		t.Run(name, func(t *testing.T) {
			c, rec, _ := newChecker(t, tc.objs)
			problems := c.Check(context.Background())
			if len(problems) != tc.policies {
				t.Fatalf("problems %v, want %d", problems, tc.policies)
			}
			found := false
			for policy, p := range problems {
				found = found || strings.Contains(p, tc.want)
				if n := testutil.ToFloat64(c.Metrics.ready.WithLabelValues(policy)); n != 0 {
					t.Fatalf("gauge of %s is %v, want 0", policy, n)
				}
			}
			if !found {
				t.Fatalf("problems %v, want one saying %q", problems, tc.want)
			}
			if len(rec.Events) != tc.policies {
				t.Fatalf("%d events, want %d", len(rec.Events), tc.policies)
			}
			if e := <-rec.Events; !strings.HasPrefix(e, "Warning AdmissionPolicyMissing") {
				t.Fatalf("event %q", e)
			}
			c.Check(context.Background())
			if len(rec.Events) != tc.policies-1 {
				t.Fatalf("the same problem reported again: %d events left", len(rec.Events))
			}
		})
	}
}

func typeName(o client.Object) string {
	switch o.(type) {
	case *admissionregistrationv1.ValidatingAdmissionPolicy:
		return "ValidatingAdmissionPolicy"
	case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
		return "ValidatingAdmissionPolicyBinding"
	case *admissionregistrationv1.MutatingAdmissionPolicy:
		return "MutatingAdmissionPolicy"
	case *corev1.ConfigMap:
		return "ConfigMap"
	}
	return ""
}

// Where the cluster has no candidate policy (older than 1.36), the pod webhook admits
// candidates: nothing is wrong, and the log says which admission is in place.
func TestThePodWebhookAdmitsCandidatesWithoutThePolicy(t *testing.T) {
	var objs []client.Object
	for _, o := range installed() {
		if o.GetName() != CandidatePolicy {
			objs = append(objs, o)
		}
	}
	objs = append(objs, &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "hooks"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "pods.fencing.fencedlease.io", Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
			Rule:       admissionregistrationv1.Rule{Resources: []string{"pods"}},
		}}}}})
	c, rec, _ := newChecker(t, objs)
	if problems := c.Check(context.Background()); len(problems) != 0 {
		t.Fatalf("problems %v", problems)
	}
	if n := testutil.ToFloat64(c.Metrics.ready.WithLabelValues(CandidatePolicy)); n != 1 {
		t.Fatalf("gauge %v, want 1", n)
	}
	if len(rec.Events) != 0 {
		t.Fatalf("an event with nothing wrong: %s", <-rec.Events)
	}
	if by, _ := c.candidateAdmission(context.Background()); by != "the pod webhook of MutatingWebhookConfiguration hooks" {
		t.Fatalf("admitted by %q", by)
	}
}
