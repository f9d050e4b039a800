package k0rdentsim

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
)

// Admission as KCM's validating webhook for ClusterDeployments does it: the same checks, the same
// webhook name and messages, and status 403 (controller-runtime's admission.Denied).
const (
	// AdmissionWebhookName is the name KCM's ClusterDeployment webhook has.
	AdmissionWebhookName = "validation.clusterdeployment.k0rdent.mirantis.com"
	// AdmissionConfigName is the ValidatingWebhookConfiguration the simulator registers.
	AdmissionConfigName          = "k0rdent-simulator-validation"
	invalidClusterDeploymentMsg  = "the ClusterDeployment is invalid"
	infrastructureProviderPrefix = "infrastructure-"
)

// admission serves KCM's ClusterDeployment validation over TLS on a loopback port.
type admission struct {
	reader client.Reader
	srv    *http.Server
	caPEM  []byte
	url    string
}

// startAdmission starts the webhook server and registers it on the management API server.
func startAdmission(ctx context.Context, c client.Client, reader client.Reader) (*admission, error) {
	caPEM, cert, err := SelfSignedServing()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	a := &admission{reader: reader, caPEM: caPEM, url: fmt.Sprintf("https://%s/validate-clusterdeployment", ln.Addr())}
	mux := http.NewServeMux()
	mux.HandleFunc("/validate-clusterdeployment", a.serve)
	a.srv = &http.Server{Handler: mux, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = a.srv.ServeTLS(ln, "", "") }()
	fail := admissionregistrationv1.Fail
	none := admissionregistrationv1.SideEffectClassNone
	timeout := int32(10)
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: AdmissionConfigName}}
	_, err = controllerutil.CreateOrUpdate(ctx, c, cfg, func() error {
		cfg.Webhooks = []admissionregistrationv1.ValidatingWebhook{{
			Name:                    AdmissionWebhookName,
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &a.url, CABundle: caPEM},
			Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update}, Rule: admissionregistrationv1.Rule{APIGroups: []string{k0rdentv1beta1.GroupVersion.Group}, APIVersions: []string{k0rdentv1beta1.GroupVersion.Version}, Resources: []string{"clusterdeployments"}}}},
			FailurePolicy:           &fail,
			SideEffects:             &none,
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          &timeout,
		}}
		return nil
	})
	if err != nil {
		_ = a.srv.Close()
		return nil, fmt.Errorf("k0rdentsim: registering the ClusterDeployment webhook: %w", err)
	}
	return a, nil
}

func (a *admission) stop() {
	if a != nil && a.srv != nil {
		_ = a.srv.Close()
	}
}

func (a *admission) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil || review.Request == nil {
		http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
		return
	}
	resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
	if err := a.validate(r.Context(), review.Request); err != nil {
		resp.Allowed = false
		resp.Result = &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: err.Error()}
	}
	review.Response, review.Request = resp, nil
	out, _ := json.Marshal(review)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
}

func (a *admission) validate(ctx context.Context, req *admissionv1.AdmissionRequest) error {
	var cd k0rdentv1beta1.ClusterDeployment
	if err := json.Unmarshal(req.Object.Raw, &cd); err != nil {
		return fmt.Errorf("expected ClusterDeployment: %w", err)
	}
	var old *k0rdentv1beta1.ClusterDeployment
	if req.Operation == admissionv1.Update {
		old = &k0rdentv1beta1.ClusterDeployment{}
		if err := json.Unmarshal(req.OldObject.Raw, old); err != nil {
			return fmt.Errorf("expected ClusterDeployment: %w", err)
		}
	}
	return validateClusterDeployment(ctx, a.reader, &cd, old)
}

// validateClusterDeployment is KCM's ClusterDeployment validation (create when old is nil, else
// update): the ClusterTemplate exists and is valid (on update: when it changes, it is one of
// status.availableUpgrades), the Credential exists, is ready and its identity kind suits the
// template's infrastructure provider, dataSource is neither added nor removed, and every service's
// ServiceTemplate exists and is valid.
func validateClusterDeployment(ctx context.Context, c client.Reader, cd, old *k0rdentv1beta1.ClusterDeployment) error {
	var tmpl k0rdentv1beta1.ClusterTemplate
	if err := c.Get(ctx, client.ObjectKey{Namespace: cd.Namespace, Name: cd.Spec.Template}, &tmpl); err != nil {
		return fmt.Errorf("%s: %w", invalidClusterDeploymentMsg, err)
	}
	if old != nil && old.Spec.Template != cd.Spec.Template && !slices.Contains(old.Status.AvailableUpgrades, cd.Spec.Template) {
		return errors.New("cluster upgrade is forbidden")
	}
	if old == nil || old.Spec.Template != cd.Spec.Template {
		if !tmpl.Status.Valid {
			return fmt.Errorf("%s: the ClusterTemplate %s is invalid with the error: %s", invalidClusterDeploymentMsg, client.ObjectKeyFromObject(&tmpl), tmpl.Status.ValidationError)
		}
	}
	if old != nil && (old.Spec.DataSource == "") != (cd.Spec.DataSource == "") {
		return fmt.Errorf("%s: spec.dataSource cannot be added or removed", invalidClusterDeploymentMsg)
	}
	if err := validateCredential(ctx, c, cd, &tmpl); err != nil {
		return fmt.Errorf("%s: %w", invalidClusterDeploymentMsg, err)
	}
	var errs error
	for _, svc := range cd.Spec.ServiceSpec.Services {
		var st k0rdentv1beta1.ServiceTemplate
		key := client.ObjectKey{Namespace: cd.Namespace, Name: svc.Template}
		if err := c.Get(ctx, key, &st); err != nil {
			errs = errors.Join(errs, fmt.Errorf("failed to get ServiceTemplate %s: %w", key, err))
			continue
		}
		if !st.Status.Valid {
			errs = errors.Join(errs, fmt.Errorf("the ServiceTemplate %s is invalid with the error: %s", key, st.Status.ValidationError))
		}
	}
	if errs != nil {
		return fmt.Errorf("%s: %w", invalidClusterDeploymentMsg, errs)
	}
	return nil
}

// validateCredential is KCM's credential check. The simulator's infrastructure provider
// (infrastructure-kwok) accepts Secret identities, as KCM's infrastructure-internal does.
func validateCredential(ctx context.Context, c client.Reader, cd *k0rdentv1beta1.ClusterDeployment, tmpl *k0rdentv1beta1.ClusterTemplate) error {
	if len(tmpl.Status.Providers) == 0 {
		return fmt.Errorf("no providers have been found in the ClusterTemplate %s", client.ObjectKeyFromObject(tmpl))
	}
	var infra []string
	for _, p := range tmpl.Status.Providers {
		if strings.HasPrefix(p, infrastructureProviderPrefix) {
			infra = append(infra, p)
		}
	}
	if len(infra) == 0 {
		return fmt.Errorf("no infrastructure providers have been found in the ClusterTemplate %s", client.ObjectKeyFromObject(tmpl))
	}
	var cred k0rdentv1beta1.Credential
	key := client.ObjectKey{Namespace: cd.Namespace, Name: cd.Spec.Credential}
	if err := c.Get(ctx, key, &cred); err != nil {
		return fmt.Errorf("failed to get Credential %s referred in the ClusterDeployment %s: %w", key, client.ObjectKeyFromObject(cd), err)
	}
	if !cred.Status.Ready {
		return fmt.Errorf("the Credential %s is not Ready", key)
	}
	kind := ""
	if cred.Spec.IdentityRef != nil {
		kind = cred.Spec.IdentityRef.Kind
	}
	for _, p := range infra {
		if p != infrastructureProviderPrefix+"kwok" && p != infrastructureProviderPrefix+"internal" {
			return fmt.Errorf("unsupported infrastructure provider %s", p)
		}
		if kind != "Secret" {
			return fmt.Errorf("provider %s does not support ClusterIdentity Kind %s from the Credential %s", p, kind, client.ObjectKeyFromObject(&cred))
		}
	}
	return nil
}

// SelfSignedServing returns a CA certificate (PEM) and a serving certificate for 127.0.0.1 it signed.
func SelfSignedServing() ([]byte, tls.Certificate, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "k0rdent-simulator-ca"}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(10 * 365 * 24 * time.Hour),
		IsCA: true, KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "k0rdent-simulator"}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	cert, err := tls.X509KeyPair(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), cert, err
}
