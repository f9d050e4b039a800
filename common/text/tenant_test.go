package text

import "testing"

func TestWorkspaceSeenFrom(t *testing.T) {
	for _, tc := range []struct{ viewer, key, want string }{
		{"team-a", "team-a/nb", "workspace nb"},
		{"team-a", "team-b/nb", "a workspace of another namespace"},
		{"team-a", "team-a", "a workspace of another namespace"},
		{"team-a", "", "a workspace of another namespace"},
		{"", "/nb", "workspace nb"},
	} {
		if got := WorkspaceKeySeenFrom(tc.viewer, tc.key); got != tc.want {
			t.Errorf("WorkspaceKeySeenFrom(%q, %q) = %q, want %q", tc.viewer, tc.key, got, tc.want)
		}
	}
}
