package testenv

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"time"

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

// BindClusterRole grants subject the ClusterRole role in namespace ns.
func BindClusterRole(ctx context.Context, c client.Client, ns, role string, subject rbacv1.Subject) error {
	return c.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: role + "-"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{subject},
	})
}
