package v1

import "time"

// Defaults of a WorkspaceClass's timeouts. The API server fills them in through the fields'
// +kubebuilder:default markers; the controller applies them to an object that lacks them (one written
// before the default existed). defaults_test.go checks that both say the same.
const (
	// DefaultDeployTimeout applies when a class sets no deployTimeout.
	DefaultDeployTimeout = 15 * time.Minute
	// DefaultPrerequisiteDeployTimeout applies when a class sets no prerequisiteDeployTimeout.
	DefaultPrerequisiteDeployTimeout = 10 * time.Minute
)

// DefaultReclaimGracePeriod applies when no WorkspaceQuota of the namespace whose guarantee is claimed
// back sets spec.reclaimGracePeriod.
const DefaultReclaimGracePeriod = 10 * time.Minute

// ReclaimGracePeriodOf returns the shortest positive spec.reclaimGracePeriod of quotas, or
// DefaultReclaimGracePeriod when none sets one.
func ReclaimGracePeriodOf(quotas []WorkspaceQuota) time.Duration {
	var out time.Duration
	for i := range quotas {
		if d := quotas[i].Spec.ReclaimGracePeriod; d != nil && d.Duration > 0 && (out == 0 || d.Duration < out) {
			out = d.Duration
		}
	}
	if out == 0 {
		return DefaultReclaimGracePeriod
	}
	return out
}

// DeployTimeoutOrDefault returns spec.deployTimeout, or DefaultDeployTimeout when it is unset or not
// positive.
func (s *WorkspaceClassSpec) DeployTimeoutOrDefault() time.Duration {
	if d := s.DeployTimeout; d != nil && d.Duration > 0 {
		return d.Duration
	}
	return DefaultDeployTimeout
}

// PrerequisiteDeployTimeoutOrDefault returns spec.prerequisiteDeployTimeout, or
// DefaultPrerequisiteDeployTimeout when it is unset or not positive.
func (s *WorkspaceClassSpec) PrerequisiteDeployTimeoutOrDefault() time.Duration {
	if d := s.PrerequisiteDeployTimeout; d != nil && d.Duration > 0 {
		return d.Duration
	}
	return DefaultPrerequisiteDeployTimeout
}
