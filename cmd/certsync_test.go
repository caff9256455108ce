package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// The certificate reaches the webhook's folder from its Secret as soon as the Secret is
// filled, and again when it is rotated; an empty Secret writes nothing.
func TestTheWebhookCertificateIsWrittenFromItsSecret(t *testing.T) {
	key := types.NamespacedName{Namespace: "fencedlease-system", Name: "fencedlease-webhook-server-cert"}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	c := fake.NewClientBuilder().WithObjects(secret).Build()
	dir := filepath.Join(t.TempDir(), "serving-certs")
	s := newCertSync(c, key, dir)
	s.soon, s.later = 10*time.Millisecond, 10*time.Millisecond
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Start(ctx) }()
	// Stopped, and its last write finished, before the folder is removed.
	t.Cleanup(func() { stop(); <-done })

	time.Sleep(50 * time.Millisecond)
	if _, err := os.Stat(filepath.Join(dir, "tls.crt")); !os.IsNotExist(err) {
		t.Fatalf("an empty Secret wrote a certificate (%v)", err)
	}
	fill := func(cert, key string) {
		t.Helper()
		if err := c.Get(ctx, types.NamespacedName{Namespace: secret.Namespace, Name: secret.Name}, secret); err != nil {
			t.Fatal(err)
		}
		secret.Data = map[string][]byte{"tls.crt": []byte(cert), "tls.key": []byte(key)}
		if err := c.Update(ctx, secret); err != nil {
			t.Fatal(err)
		}
	}
	holds := func(cert, key string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			c, _ := os.ReadFile(filepath.Join(dir, "tls.crt"))
			k, _ := os.ReadFile(filepath.Join(dir, "tls.key"))
			if string(c) == cert && string(k) == key {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the folder holds %q/%q, want %q/%q", c, k, cert, key)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	fill("cert-1", "key-1")
	holds("cert-1", "key-1")
	select {
	case <-s.written:
	default:
		t.Fatal("written is not closed once the folder holds a certificate")
	}
	fill("cert-2", "key-2") // rotated
	holds("cert-2", "key-2")
}
