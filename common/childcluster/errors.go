package childcluster

import (
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
)

// Reasons of an UnreachableError.
const (
	// ReasonKubeconfigMissing: the ClusterDeployment's kubeconfig Secret does not exist (yet).
	ReasonKubeconfigMissing = "KubeconfigMissing"
	// ReasonKubeconfigInvalid: the Secret lacks the key "value" or does not hold a usable kubeconfig.
	ReasonKubeconfigInvalid = "KubeconfigInvalid"
	// ReasonConnectFailed: the child's API server could not be listed and watched within the sync
	// timeout.
	ReasonConnectFailed = "ConnectFailed"
	// ReasonUnauthorized: the child's API server refused the kubeconfig's credentials (401 or 403). It
	// is reported at the first refusal, not after the sync timeout; a rotated Secret is used at once.
	ReasonUnauthorized = "Unauthorized"
	// ReasonConnecting: a connect is under way (only from TryGet, which never waits for it). The
	// cache notifies subscribers when it ends.
	ReasonConnecting = "Connecting"
	// ReasonUnhealthy: the child was connected but its API server stopped answering; the watches keep
	// retrying and the last seen Nodes and Pods stay in the cache.
	ReasonUnhealthy = "Unhealthy"
)

// ErrStopped is returned by Get once the Cache has been stopped.
var ErrStopped = errors.New("childcluster: cache stopped")

// UnreachableError says that a child cluster cannot be reached through its kubeconfig Secret. Its
// message names the ClusterDeployment and the cause, never the kubeconfig's content.
type UnreachableError struct {
	// Cluster is the ClusterDeployment.
	Cluster types.NamespacedName
	// Reason is one of the Reason* constants.
	Reason string
	// Err is the underlying error.
	Err error
	// RetryAt, when set, is the earliest time a new connect is attempted (backoff after failures).
	RetryAt time.Time
}

// Error implements error.
func (e *UnreachableError) Error() string {
	msg := fmt.Sprintf("child cluster %s is unreachable (%s)", e.Cluster, e.Reason)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the underlying error.
func (e *UnreachableError) Unwrap() error { return e.Err }

// IsUnreachable reports whether err, or an error it wraps, is an *UnreachableError.
func IsUnreachable(err error) bool {
	var u *UnreachableError
	return errors.As(err, &u)
}

// UnreachableReason returns the reason of an *UnreachableError in err's chain, or "".
func UnreachableReason(err error) string {
	var u *UnreachableError
	if errors.As(err, &u) {
		return u.Reason
	}
	return ""
}

// RetryAfter returns how long to wait before a Get can try a new connect, for requeueing: the
// remaining backoff of an *UnreachableError in err's chain, or 0.
func RetryAfter(err error) time.Duration {
	var u *UnreachableError
	if errors.As(err, &u) && !u.RetryAt.IsZero() {
		if d := time.Until(u.RetryAt); d > 0 {
			return d
		}
	}
	return 0
}

// isAuthError reports whether err is the child's API server refusing the credentials.
func isAuthError(err error) bool {
	return apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err)
}
