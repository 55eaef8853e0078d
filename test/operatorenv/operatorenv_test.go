package operatorenv

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"testing"
	"time"
)

const bothKinds = `---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: mutating-webhook-configuration
webhooks:
- admissionReviewVersions: [v1]
  clientConfig:
    service: {name: webhook-service, namespace: system, path: /mutate-jobset-x-k8s-io-v1alpha2-jobset}
  failurePolicy: Fail
  name: mjobset.kb.io
  rules:
  - apiGroups: [jobset.x-k8s.io]
    apiVersions: [v1alpha2]
    operations: [CREATE, UPDATE]
    resources: [jobsets]
  sideEffects: None
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: validating-webhook-configuration
webhooks:
- admissionReviewVersions: [v1]
  clientConfig:
    service: {name: webhook-service, namespace: system, path: /validate-jobset-x-k8s-io-v1alpha2-jobset}
  failurePolicy: Fail
  name: vjobset.kb.io
  rules:
  - apiGroups: [jobset.x-k8s.io]
    apiVersions: [v1alpha2]
    operations: [CREATE, UPDATE]
    resources: [jobsets]
  sideEffects: None
`

const validatingOnly = `---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: validating-webhook-configuration
webhooks:
- admissionReviewVersions: [v1]
  clientConfig:
    service: {name: webhook-service, namespace: system, path: /validate-trainer-kubeflow-org-v1alpha1-trainjob}
  failurePolicy: Fail
  name: validator.trainjob.trainer.kubeflow.org
  rules:
  - apiGroups: [trainer.kubeflow.org]
    apiVersions: [v1alpha1]
    operations: [CREATE, UPDATE]
    resources: [trainjobs]
  sideEffects: None
`

func TestLoopbackWebhooks(t *testing.T) {
	ca := []byte("CA")
	cases := []struct {
		name, manifests              string
		wantMutating, wantValidating []string // configuration names
		wantURLs                     []string // every webhook's, mutating first
		wantErr                      bool
	}{
		{name: "both kinds get a suffix each", manifests: bothKinds,
			wantMutating: []string{"op-mutating"}, wantValidating: []string{"op-validating"},
			wantURLs: []string{"https://127.0.0.1:9443/mutate-jobset-x-k8s-io-v1alpha2-jobset", "https://127.0.0.1:9443/validate-jobset-x-k8s-io-v1alpha2-jobset"}},
		{name: "one kind keeps the name (a cert rotator may look it up)", manifests: validatingOnly,
			wantValidating: []string{"op"},
			wantURLs:       []string{"https://127.0.0.1:9443/validate-trainer-kubeflow-org-v1alpha1-trainjob"}},
		{name: "an unknown kind", manifests: "kind: Service\nmetadata:\n  name: x\n", wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w, err := LoopbackWebhooks([]byte(tc.manifests), "op", 9443, ca, "demo")
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			var mutating, validating, urls []string
			check := func(name string, url *string, service bool, caBundle []byte, ns map[string]string) {
				if url == nil || service || string(caBundle) != "CA" || ns["kubernetes.io/metadata.name"] != "demo" || len(ns) != 1 {
					t.Errorf("webhook %s: url %v, service %v, caBundle %q, namespaces %v; want a URL, no service, the CA, namespace demo only", name, url, service, caBundle, ns)
					return
				}
				urls = append(urls, *url)
			}
			for _, c := range w.Mutating {
				mutating = append(mutating, c.Name)
				for _, h := range c.Webhooks {
					check(h.Name, h.ClientConfig.URL, h.ClientConfig.Service != nil, h.ClientConfig.CABundle, h.NamespaceSelector.MatchLabels)
				}
			}
			for _, c := range w.Validating {
				validating = append(validating, c.Name)
				for _, h := range c.Webhooks {
					check(h.Name, h.ClientConfig.URL, h.ClientConfig.Service != nil, h.ClientConfig.CABundle, h.NamespaceSelector.MatchLabels)
				}
			}
			if !equal(mutating, tc.wantMutating) || !equal(validating, tc.wantValidating) || !equal(urls, tc.wantURLs) {
				t.Errorf("mutating %v, validating %v, URLs %v; want %v, %v, %v", mutating, validating, urls, tc.wantMutating, tc.wantValidating, tc.wantURLs)
			}
		})
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestSelfSignedCA: the pair is a usable TLS key pair, a CA for the names and 127.0.0.1, with its key in
// PKCS #1 (Trainer's rotator, in a cluster, parses it so).
func TestSelfSignedCA(t *testing.T) {
	certPEM, keyPEM, err := TrainerCert()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		t.Fatalf("not a TLS key pair: %v", err)
	}
	block, _ := pem.Decode(keyPEM)
	if _, err := x509.ParsePKCS1PrivateKey(block.Bytes); err != nil {
		t.Errorf("the key is not PKCS #1: %v", err)
	}
	block, _ = pem.Decode(certPEM)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if !cert.IsCA || cert.VerifyHostname(TrainerDNSName) != nil || cert.VerifyHostname("127.0.0.1") != nil || cert.NotAfter.Before(time.Now().Add(364*24*time.Hour)) {
		t.Errorf("certificate: CA %v, names %v %v, until %v; want a CA for %s and 127.0.0.1 for a year", cert.IsCA, cert.DNSNames, cert.IPAddresses, cert.NotAfter, TrainerDNSName)
	}
}
