package world

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// credentialNamespace holds the ServiceAccounts behind token credentials of a child.
const credentialNamespace = "kube-system"

// TokenKubeconfig returns a cluster-admin kubeconfig for the child that authenticates with a bound
// ServiceAccount token (ServiceAccount `name` in kube-system), as a cloud provider's revocable
// credential would. RevokeToken invalidates every token of that name at once.
func (c *ChildCluster) TokenKubeconfig(ctx context.Context, name string) ([]byte, error) {
	cl := c.Env.Client
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: credentialNamespace, Name: name}}
	if err := cl.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("child %s: ServiceAccount %s: %w", c.Name, name, err)
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "token-credential-" + name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: credentialNamespace, Name: name}},
	}
	if err := cl.Create(ctx, crb); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("child %s: ClusterRoleBinding for %s: %w", c.Name, name, err)
	}
	cs, err := kubernetes.NewForConfig(c.Env.Config)
	if err != nil {
		return nil, err
	}
	expiry := int64(24 * 3600)
	tr, err := cs.CoreV1().ServiceAccounts(credentialNamespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("child %s: token for %s: %w", c.Name, name, err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[c.Name] = &clientcmdapi.Cluster{Server: c.Env.Config.Host, CertificateAuthorityData: c.Env.Config.CAData}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts[c.Name] = &clientcmdapi.Context{Cluster: c.Name, AuthInfo: name}
	cfg.CurrentContext = c.Name
	return clientcmd.Write(*cfg)
}

// RevokeToken deletes the ServiceAccount behind TokenKubeconfig(name): the API server refuses its
// tokens from then on.
func (c *ChildCluster) RevokeToken(ctx context.Context, name string) error {
	cl := c.Env.Client
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: credentialNamespace, Name: name}}
	if err := cl.Delete(ctx, sa); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("child %s: revoking %s: %w", c.Name, name, err)
	}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "token-credential-" + name}}
	if err := cl.Delete(ctx, crb); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("child %s: revoking %s: %w", c.Name, name, err)
	}
	return nil
}
