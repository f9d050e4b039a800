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
