package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// certSync writes the webhook's serving certificate from its Secret into the webhook's
// certificate folder, read through the API as soon as the Secret holds one and again on
// every change. A Secret volume would carry it too, but only when the kubelet next syncs
// the volume — up to a minute or more after the Secret was filled — and the operator is
// not Ready until its webhook serves: a fresh install waited that long.
type certSync struct {
	reader client.Reader
	secret types.NamespacedName
	dir    string
	// written is closed once the folder holds a certificate.
	written chan struct{}
	// soon is how often the Secret is read until it holds a certificate; then every later.
	soon, later time.Duration
}

func newCertSync(reader client.Reader, secret types.NamespacedName, dir string) *certSync {
	return &certSync{reader: reader, secret: secret, dir: dir, written: make(chan struct{}), soon: 250 * time.Millisecond, later: 30 * time.Second}
}

// NeedLeaderElection is false: every replica serves the webhook.
func (s *certSync) NeedLeaderElection() bool { return false }

// Start reads the Secret until ctx ends.
func (s *certSync) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithName("webhook-cert-sync")
	for {
		every := s.soon
		switch changed, err := s.sync(ctx); {
		case err != nil && !apierrors.IsNotFound(err):
			log.Error(err, "reading the webhook's certificate", "secret", s.secret)
		case changed:
			log.Info("webhook certificate written", "secret", s.secret, "dir", s.dir)
		}
		select {
		case <-s.written:
			every = s.later
		default:
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(every):
		}
	}
}

// sync writes the Secret's tls.crt and tls.key into the folder when they differ from
// what it holds; true when it wrote.
func (s *certSync) sync(ctx context.Context) (bool, error) {
	secret := &corev1.Secret{}
	if err := s.reader.Get(ctx, s.secret, secret); err != nil {
		return false, err
	}
	cert, key := secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey]
	if len(cert) == 0 || len(key) == 0 {
		return false, nil // not filled yet
	}
	changed := false
	// The key first: the server reloads on the certificate's change and reads both.
	for _, f := range []struct {
		name string
		data []byte
	}{{corev1.TLSPrivateKeyKey, key}, {corev1.TLSCertKey, cert}} {
		path := filepath.Join(s.dir, f.name)
		if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, f.data) {
			continue
		}
		if err := writeAtomically(path, f.data); err != nil {
			return changed, err
		}
		changed = true
	}
	select {
	case <-s.written:
	default:
		close(s.written)
	}
	return changed, nil
}

// writeAtomically replaces path with data: a reader sees the old file or the new one.
func writeAtomically(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
