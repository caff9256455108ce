package testenv

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// ServeWebhook serves each handler at its path where envtest points the webhook
// configurations it installed, and returns once the server accepts TLS connections.
// Cancel ctx to stop it; errs receives what the server's Start returned.
func ServeWebhook(ctx context.Context, o *envtest.WebhookInstallOptions, handlers map[string]*webhook.Admission) (errs <-chan error, err error) {
	srv := webhook.NewServer(webhook.Options{Host: o.LocalServingHost, Port: o.LocalServingPort, CertDir: o.LocalServingCertDir})
	for path, handler := range handlers {
		srv.Register(path, handler)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	addr := net.JoinHostPort(o.LocalServingHost, fmt.Sprint(o.LocalServingPort))
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // a local test server
		if err != nil {
			return false, nil
		}
		return true, conn.Close()
	})
	return done, err
}

// BindClusterRole grants subject the ClusterRole role in namespace ns, and returns once the
// API server's authorizer acts on the binding: it learns of bindings from a watch, so a
// request made right after the create can still be refused.
func BindClusterRole(ctx context.Context, c client.Client, ns, role string, subject rbacv1.Subject) error {
	cr := &rbacv1.ClusterRole{}
	if err := c.Get(ctx, client.ObjectKey{Name: role}, cr); err != nil {
		return err
	}
	if err := c.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: role + "-"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{subject},
	}); err != nil {
		return err
	}
	attrs := firstGrant(cr.Rules, ns)
	if attrs == nil {
		return nil // nothing to ask the authorizer about
	}
	review := &authorizationv1.SubjectAccessReview{Spec: reviewerOf(subject, ns)}
	review.Spec.ResourceAttributes = attrs
	return wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		asked := review.DeepCopy()
		if err := c.Create(ctx, asked); err != nil {
			return false, err
		}
		return asked.Status.Allowed, nil
	})
}

// reviewerOf is who subject acts as, as the authorizer sees a request of theirs.
func reviewerOf(subject rbacv1.Subject, ns string) authorizationv1.SubjectAccessReviewSpec {
	switch subject.Kind {
	case rbacv1.ServiceAccountKind:
		saNS := subject.Namespace
		if saNS == "" {
			saNS = ns
		}
		return authorizationv1.SubjectAccessReviewSpec{
			User:   "system:serviceaccount:" + saNS + ":" + subject.Name,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + saNS, "system:authenticated"},
		}
	case rbacv1.GroupKind:
		return authorizationv1.SubjectAccessReviewSpec{User: "someone", Groups: []string{subject.Name, "system:authenticated"}}
	default:
		return authorizationv1.SubjectAccessReviewSpec{User: subject.Name, Groups: []string{"system:authenticated"}}
	}
}

// firstGrant is one request the rules allow in ns: the first rule not limited to names.
func firstGrant(rules []rbacv1.PolicyRule, ns string) *authorizationv1.ResourceAttributes {
	for _, r := range rules {
		if len(r.ResourceNames) > 0 || len(r.Verbs) == 0 || len(r.Resources) == 0 || len(r.APIGroups) == 0 {
			continue
		}
		resource, sub, _ := strings.Cut(r.Resources[0], "/")
		return &authorizationv1.ResourceAttributes{Namespace: ns, Verb: r.Verbs[0], Group: r.APIGroups[0], Resource: resource, Subresource: sub}
	}
	return nil
}
