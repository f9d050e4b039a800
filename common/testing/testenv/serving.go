package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// EnvServingAddress names an IP address of this host that every API server testenv starts (management
// and children) listens on instead of 127.0.0.1. The local world's node sets it to its bridge address,
// so that pods reach the API servers; the management server's certificate then also names the
// in-cluster addresses of the kubernetes Service (10.0.0.1, kubernetes.default.svc...).
const EnvServingAddress = "EXALSIUS_TESTENV_ADDRESS"

// KubernetesServiceIP is the ClusterIP of the default/kubernetes Service: the first address of the
// service range envtest gives every API server (10.0.0.0/24).
const KubernetesServiceIP = "10.0.0.1"

// servingAddress returns the address of EnvServingAddress, or "" for the loopback default.
func servingAddress() (string, error) {
	a := os.Getenv(EnvServingAddress)
	if a == "" {
		return "", nil
	}
	if net.ParseIP(a) == nil {
		return "", fmt.Errorf("%s=%q is not an IP address", EnvServingAddress, a)
	}
	return a, nil
}

// listenOn makes the API server listen on and advertise addr, with a free port there. envtest would
// otherwise pick a loopback address (it overwrites the address when the port is empty).
func listenOn(api *envtest.APIServer, addr string) error {
	l, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
	if err != nil {
		return fmt.Errorf("no free port on %s (%s): %w", addr, EnvServingAddress, err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	api.SecureServing.Address = addr
	api.SecureServing.Port = strconv.Itoa(port)
	// The default/kubernetes Service's endpoint (kube-apiserver refuses a loopback one, and then
	// advertises the host's default-route address).
	if !net.ParseIP(addr).IsLoopback() {
		api.Configure().Set("advertise-address", addr)
	}
	return nil
}

// writeClusterServingCerts writes what envtest would write into certDir (a serving certificate and
// the service-account signing key pair), but with a serving certificate that in-cluster clients
// accept: it names localhost, 127.0.0.1, addr, the kubernetes Service's ClusterIP and its DNS names.
// envtest keeps files it finds, so the API server uses these; the returned CA goes into the client
// configuration.
func writeClusterServingCerts(api *envtest.APIServer, certDir, addr string) error {
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "testenv-serving-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	ips := []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(KubernetesServiceIP)}
	if ip := net.ParseIP(addr); ip != nil {
		ips = append(ips, ip)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local"},
		IPAddresses: ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	// Service-account tokens are signed with an RSA key (RS256), as envtest does.
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	saPub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return err
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	files := map[string][]byte{
		"apiserver.crt": append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), caPEM...),
		"apiserver.key": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		"sa-signer.key": pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(saKey)}),
		"sa-signer.crt": pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPub}),
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(certDir, name), b, 0o600); err != nil {
			return err
		}
	}
	api.SecureServing.CA = caPEM
	return nil
}
