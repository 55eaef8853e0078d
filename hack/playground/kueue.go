package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// Kueue v0.17.0 out of a cluster (as test/interop/kueue_test.go runs it): internal certificate
// management off, a self-signed serving certificate in its webhook.certDir, its metrics certificate at
// the hard-coded /etc/kueue/metrics/certs (written when missing), no leader election, the visibility
// server off. Its pod webhook is registered for namespace demo, called on loopback.
var (
	kueueDir            = filepath.Join(os.TempDir(), "custom-scheduler-playground-kueue")
	kueueMetricsCertDir = "/etc/kueue/metrics/certs"
	kueueWebhookPort    = freePort()
	kueueHealthPort     = freePort()
	kueueCA             []byte
	kueueCRDs           = func() []string {
		var files []string
		for _, n := range []string{"admissionchecks", "clusterqueues", "cohorts", "localqueues", "multikueueclusters", "multikueueconfigs",
			"provisioningrequestconfigs", "resourceflavors", "topologies", "workloadpriorityclasses", "workloads"} {
			files = append(files, "config/components/crd/bases/kueue.x-k8s.io_"+n+".yaml")
		}
		return files
	}()
)

func prepareKueue(ctx context.Context, c kubernetes.Interface, _ string) error {
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kueue-system"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	certDir := filepath.Join(kueueDir, "certs")
	var err error
	if kueueCA, err = writeCert(certDir); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(kueueMetricsCertDir, "tls.crt")); err != nil {
		fmt.Printf("Writing a self-signed metrics certificate to %s (Kueue reads it there when its cert management is off).\n", kueueMetricsCertDir)
		if _, err := writeCert(kueueMetricsCertDir); err != nil {
			return fmt.Errorf("kueue reads its metrics certificate from %s: %w", kueueMetricsCertDir, err)
		}
	}
	cfg := fmt.Sprintf(`apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: kueue-system
health:
  healthProbeBindAddress: 127.0.0.1:%s
metrics:
  bindAddress: 127.0.0.1:%s
webhook:
  host: 127.0.0.1
  port: %s
  certDir: %s
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
integrations:
  frameworks:
    - batch/job
    - pod
`, kueueHealthPort, freePort(), kueueWebhookPort, certDir)
	return os.WriteFile(filepath.Join(kueueDir, "config.yaml"), []byte(cfg), 0o600)
}

// kueueReady waits for Kueue's readiness endpoint and registers its pod webhook for namespace demo.
func kueueReady(ctx context.Context, c kubernetes.Interface, p *process, _ string) error {
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		select {
		case err := <-p.exited:
			return false, fmt.Errorf("kueue exited (%v); see %s", err, p.logPath)
		default:
		}
		resp, err := http.Get("http://127.0.0.1:" + kueueHealthPort + "/readyz")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	}); err != nil {
		return fmt.Errorf("kueue did not become ready: %w; see %s", err, p.logPath)
	}
	whc := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "kueue-playground-pods"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    "mpod.kb.io",
			AdmissionReviewVersions: []string{"v1"},
			ClientConfig: admissionregistrationv1.WebhookClientConfig{
				URL: ptr.To("https://127.0.0.1:" + kueueWebhookPort + "/mutate--v1-pod"), CABundle: kueueCA,
			},
			FailurePolicy:     ptr.To(admissionregistrationv1.Fail),
			SideEffects:       ptr.To(admissionregistrationv1.SideEffectClassNone),
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "demo"}},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
			}},
		}},
	}
	if _, err := c.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, whc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// writeCert writes a self-signed certificate for 127.0.0.1 (tls.crt, tls.key) into dir and returns it.
func writeCert(dir string) ([]byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "kueue-playground"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(30 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	crt := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), crt, 0o644); err != nil {
		return nil, err
	}
	return crt, os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600)
}
