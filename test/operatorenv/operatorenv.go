// Package operatorenv runs operators out of a cluster against a local apiserver, with their admission
// webhooks for real: self-signed serving certificates, their webhook manifests registered to call them by
// URL on loopback, and what JobSet and Kubeflow Trainer v2 need besides. The interop tests
// (test/interop, a module of its own) and the playground (hack/playground, --operator=jobset|trainer)
// both start JobSet and Trainer this way; the operators themselves are built from the pins in
// test/interop/tools/*/go.mod.
package operatorenv

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
)

// SelfSignedCA is a self-signed certificate and its key (PEM), a CA valid for names and 127.0.0.1
// (CommonName names[0]). The key is RSA in PKCS #1, which every operator here reads (Trainer's cert
// rotator, off here but on in a cluster, parses its CA key with x509.ParsePKCS1PrivateKey).
func SelfSignedCA(names []string, validFor time.Duration) (certPEM, keyPEM []byte, err error) {
	if len(names) == 0 {
		return nil, nil, fmt.Errorf("a certificate needs a name")
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, nil, fmt.Errorf("generating a key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: names[0], Organization: []string{"custom-scheduler"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(validFor),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:              names,
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("creating a certificate: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), nil
}

// WriteKeyPair writes tls.crt and tls.key into dir (created), where a webhook server reads them.
func WriteKeyPair(dir string, certPEM, keyPEM []byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), certPEM, 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "tls.key"), keyPEM, 0o600)
}

// Ready says whether an operator's /readyz on 127.0.0.1:healthPort answers 200 and its webhook server
// on webhookPort accepts connections.
func Ready(healthPort, webhookPort int) bool {
	hc := http.Client{Timeout: 2 * time.Second}
	resp, err := hc.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", healthPort))
	if err != nil {
		return false
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false
	}
	c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", webhookPort), time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// Webhooks are an operator's webhook configurations, rewritten to call it on loopback.
type Webhooks struct {
	Mutating   []admissionregistrationv1.MutatingWebhookConfiguration
	Validating []admissionregistrationv1.ValidatingWebhookConfiguration
}

// LoopbackWebhooks reads an operator's webhook manifests (a kubebuilder manifests.yaml, whose webhooks
// name a Service) and rewrites them: each configuration is named name (with "-mutating"/"-validating"
// added when the file has both kinds), each webhook calls https://127.0.0.1:port/<its path> trusting
// caPEM, and for namespaced resources only those of namespace ns.
func LoopbackWebhooks(manifests []byte, name string, port int, caPEM []byte, ns string) (Webhooks, error) {
	var docs [][]byte
	for _, d := range strings.Split(string(manifests), "\n---") {
		if strings.Contains(d, "kind:") {
			docs = append(docs, []byte(d))
		}
	}
	nameOf := func(suffix string) string {
		if len(docs) > 1 {
			return name + suffix
		}
		return name
	}
	loopback := func(cc *admissionregistrationv1.WebhookClientConfig) error {
		if cc.Service == nil || cc.Service.Path == nil {
			return fmt.Errorf("webhook without a service path")
		}
		url := fmt.Sprintf("https://127.0.0.1:%d%s", port, *cc.Service.Path)
		*cc = admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caPEM}
		return nil
	}
	only := &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}}
	var w Webhooks
	for _, d := range docs {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(d, &meta); err != nil {
			return Webhooks{}, fmt.Errorf("parsing the webhook manifests: %w", err)
		}
		switch meta.Kind {
		case "MutatingWebhookConfiguration":
			var c admissionregistrationv1.MutatingWebhookConfiguration
			if err := yaml.Unmarshal(d, &c); err != nil {
				return Webhooks{}, fmt.Errorf("parsing the webhook manifests: %w", err)
			}
			c.ObjectMeta = metav1.ObjectMeta{Name: nameOf("-mutating")}
			for i := range c.Webhooks {
				if err := loopback(&c.Webhooks[i].ClientConfig); err != nil {
					return Webhooks{}, fmt.Errorf("%s: %w", c.Webhooks[i].Name, err)
				}
				c.Webhooks[i].NamespaceSelector = only.DeepCopy()
			}
			w.Mutating = append(w.Mutating, c)
		case "ValidatingWebhookConfiguration":
			var c admissionregistrationv1.ValidatingWebhookConfiguration
			if err := yaml.Unmarshal(d, &c); err != nil {
				return Webhooks{}, fmt.Errorf("parsing the webhook manifests: %w", err)
			}
			c.ObjectMeta = metav1.ObjectMeta{Name: nameOf("-validating")}
			for i := range c.Webhooks {
				if err := loopback(&c.Webhooks[i].ClientConfig); err != nil {
					return Webhooks{}, fmt.Errorf("%s: %w", c.Webhooks[i].Name, err)
				}
				c.Webhooks[i].NamespaceSelector = only.DeepCopy()
			}
			w.Validating = append(w.Validating, c)
		default:
			return Webhooks{}, fmt.Errorf("the webhook manifests have a %q", meta.Kind)
		}
	}
	return w, nil
}

// Create creates the configurations, replacing any of the same name.
func (w Webhooks) Create(ctx context.Context, c kubernetes.Interface) error {
	w.Delete(ctx, c)
	api := c.AdmissionregistrationV1()
	for i := range w.Mutating {
		if _, err := api.MutatingWebhookConfigurations().Create(ctx, &w.Mutating[i], metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating MutatingWebhookConfiguration %s: %w", w.Mutating[i].Name, err)
		}
	}
	for i := range w.Validating {
		if _, err := api.ValidatingWebhookConfigurations().Create(ctx, &w.Validating[i], metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating ValidatingWebhookConfiguration %s: %w", w.Validating[i].Name, err)
		}
	}
	return nil
}

// Delete deletes the configurations (those missing are skipped).
func (w Webhooks) Delete(ctx context.Context, c kubernetes.Interface) {
	api := c.AdmissionregistrationV1()
	for _, m := range w.Mutating {
		_ = api.MutatingWebhookConfigurations().Delete(ctx, m.Name, metav1.DeleteOptions{})
	}
	for _, v := range w.Validating {
		_ = api.ValidatingWebhookConfigurations().Delete(ctx, v.Name, metav1.DeleteOptions{})
	}
}

// JobSet v0.12.0 (sigs.k8s.io/jobset): its CRD and webhook manifests in its module, and its configuration
// out of a cluster.
const (
	JobSetModule   = "sigs.k8s.io/jobset"
	JobSetCRD      = "config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml"
	JobSetWebhooks = "config/components/webhook/manifests.yaml"
)

// JobSetConfig is JobSet's configuration (its --config) out of a cluster: see kubebuilderConfig.
func JobSetConfig(healthPort, webhookPort int, certDir string) string {
	return kubebuilderConfig("config.jobset.x-k8s.io/v1alpha1", healthPort, webhookPort, certDir)
}

// kubebuilderConfig is the configuration file (apiVersion, kind Configuration) that JobSet and
// LeaderWorkerSet read alike, out of a cluster: internal certificate management off (the serving
// certificate is in certDir), no leader election, no metrics server, health and webhook servers on
// loopback.
func kubebuilderConfig(apiVersion string, healthPort, webhookPort int, certDir string) string {
	return fmt.Sprintf(`apiVersion: %s
kind: Configuration
health:
  healthProbeBindAddress: 127.0.0.1:%d
metrics:
  bindAddress: "0"
webhook:
  host: 127.0.0.1
  port: %d
  certDir: %s
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
`, apiVersion, healthPort, webhookPort, certDir)
}

// LeaderWorkerSet v0.8.0 (sigs.k8s.io/lws): its CRD and webhook manifests in its module, and its
// configuration out of a cluster.
const (
	LWSModule   = "sigs.k8s.io/lws"
	LWSCRD      = "config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml"
	LWSWebhooks = "config/webhook/manifests.yaml"
)

// LWSConfig is LeaderWorkerSet's configuration (its --config) out of a cluster: see kubebuilderConfig.
func LWSConfig(healthPort, webhookPort int, certDir string) string {
	return kubebuilderConfig("config.lws.x-k8s.io/v1alpha1", healthPort, webhookPort, certDir)
}

// Kubeflow Trainer v2.2.0 (github.com/kubeflow/trainer/v2): its CRDs and webhook manifests in its module
// (a MutatingWebhookConfiguration, TrainJob defaulting, and a ValidatingWebhookConfiguration), and the
// fixed folder its webhook server reads its serving certificate from (its configuration has no certDir; a
// kubelet would mount its Secret there). Out of a cluster its cert rotator is turned off
// (certManagement.enable: false in TrainerConfig): the certificate is written there instead.
const (
	TrainerModule   = "github.com/kubeflow/trainer/v2"
	TrainerCRDs     = "manifests/base/crds/trainer.kubeflow.org_*.yaml"
	TrainerWebhooks = "manifests/base/webhook/manifests.yaml"
	TrainerDNSName  = "kubeflow-trainer-controller-manager.kubeflow-system.svc"
	TrainerCAName   = "kubeflow-trainer-ca"
	TrainerWebhook  = "kubeflow-trainer"
	TrainerCertDir  = "/tmp/k8s-webhook-server/serving-certs"
)

// TrainerCert is a serving certificate for Trainer's webhook server: valid for its in-cluster DNS name and
// 127.0.0.1, a year long.
func TrainerCert() (certPEM, keyPEM []byte, err error) {
	return SelfSignedCA([]string{TrainerCAName, TrainerDNSName}, 365*24*time.Hour)
}

// PrepareTrainer readies what Trainer needs before it starts: certPEM/keyPEM in TrainerCertDir, and its
// webhooks from manifests (mutating and validating) registered under TrainerWebhook, on loopback at
// webhookPort, trusting certPEM, for namespace ns. It returns the webhooks (to delete at the end).
func PrepareTrainer(ctx context.Context, c kubernetes.Interface, certPEM, keyPEM, manifests []byte, webhookPort int, ns string) (Webhooks, error) {
	if err := os.RemoveAll(TrainerCertDir); err != nil {
		return Webhooks{}, err
	}
	if err := WriteKeyPair(TrainerCertDir, certPEM, keyPEM); err != nil {
		return Webhooks{}, fmt.Errorf("Trainer reads its serving certificate from %s: %w", TrainerCertDir, err)
	}
	w, err := LoopbackWebhooks(manifests, TrainerWebhook, webhookPort, certPEM, ns)
	if err != nil {
		return Webhooks{}, err
	}
	return w, w.Create(ctx, c)
}

// TrainerConfig is trainer-controller-manager's configuration (its --config; v2.2.0 has no flags for its
// servers any more) out of a cluster: its cert rotator off (the serving certificate is in TrainerCertDir),
// no leader election, no metrics server, health and webhook servers on loopback.
func TrainerConfig(healthPort, webhookPort int) string {
	return fmt.Sprintf(`apiVersion: config.trainer.kubeflow.org/v1alpha1
kind: Configuration
health:
  healthProbeBindAddress: 127.0.0.1:%d
metrics:
  bindAddress: "0"
webhook:
  host: 127.0.0.1
  port: %d
leaderElection:
  leaderElect: false
certManagement:
  enable: false
`, healthPort, webhookPort)
}

// TrainerArgs are trainer-controller-manager's flags out of a cluster (KUBECONFIG in its environment):
// its configuration file, written from TrainerConfig.
func TrainerArgs(configPath string) []string {
	return []string{"--config=" + configPath}
}

// TrainerStarted says whether Trainer's log shows its TrainJob controller started.
func TrainerStarted(log []byte) bool {
	for _, line := range bytes.Split(log, []byte("\n")) {
		if bytes.Contains(line, []byte("Starting workers")) && bytes.Contains(bytes.ToLower(line), []byte("trainjob")) {
			return true
		}
	}
	return false
}
