package world

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Kubeconfig renders a kubeconfig with one cluster, user and context named name, from a rest.Config
// that carries inline credentials (client certificates or a bearer token), as envtest's do.
func Kubeconfig(cfg *rest.Config, name string) ([]byte, error) {
	if cfg == nil || cfg.Host == "" {
		return nil, fmt.Errorf("kubeconfig %q: rest config without host", name)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters[name] = &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		CertificateAuthorityData: cfg.CAData,
		CertificateAuthority:     cfg.CAFile,
		InsecureSkipTLSVerify:    cfg.Insecure,
	}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData,
		ClientKeyData:         cfg.KeyData,
		ClientCertificate:     cfg.CertFile,
		ClientKey:             cfg.KeyFile,
		Token:                 cfg.BearerToken,
		TokenFile:             cfg.BearerTokenFile,
		Username:              cfg.Username,
		Password:              cfg.Password,
	}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	kc.CurrentContext = name
	return clientcmd.Write(*kc)
}

// WriteKubeconfig writes a kubeconfig for cfg to path, readable by the owner only.
func WriteKubeconfig(cfg *rest.Config, name, path string) error {
	b, err := Kubeconfig(cfg, name)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

// handedOut holds the ports FreePort returned in this process. The port of a closed listener is free
// again at once, and the kernel may give it to the next listen on port 0: two calls in a row (a
// component's metrics and health addresses) returned the same port once, and the component could
// never start ("address already in use").
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// FreePort returns a TCP port on 127.0.0.1 that is free at the time of the call and that no earlier
// call in this process returned.
func FreePort() (int, error) {
	handedOut.Lock()
	defer handedOut.Unlock()
	for range 100 {
		port, err := listenPort()
		if err != nil {
			return 0, err
		}
		if !handedOut.ports[port] {
			handedOut.ports[port] = true
			return port, nil
		}
	}
	return 0, fmt.Errorf("no free port on 127.0.0.1 that was not handed out before (%d handed out)", len(handedOut.ports))
}

// listenPort returns the port the kernel gives a listener on 127.0.0.1 port 0, and closes it.
func listenPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }() // only its port was wanted
	return l.Addr().(*net.TCPAddr).Port, nil
}

// FreeAddr returns "127.0.0.1:<free port>".
func FreeAddr() (string, error) {
	p, err := FreePort()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), nil
}
