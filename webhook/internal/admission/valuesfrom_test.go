package admission

import (
	"reflect"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

// The review asks about the requesting user as the API server authenticated it: name, groups, uid
// and every extra value (an authorizer, a webhook authorizer for one, may decide on any of them).
func TestReadReviewCarriesTheWholeUser(t *testing.T) {
	user := authenticationv1.UserInfo{
		Username: "alice", UID: "4f1c", Groups: []string{"team-a", "system:authenticated"},
		Extra: map[string]authenticationv1.ExtraValue{"scopes.example.com": {"read", "write"}, "empty": {}},
	}
	got := readReview(user, "team-a", workspacesv1.ValuesFromSource{Kind: workspacesv1.ValuesSourceSecret, Name: "db-password"})
	want := authorizationv1.SubjectAccessReviewSpec{
		User: "alice", UID: "4f1c", Groups: []string{"team-a", "system:authenticated"},
		Extra: map[string]authorizationv1.ExtraValue{"scopes.example.com": {"read", "write"}, "empty": {}},
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: "team-a", Verb: "get", Version: "v1", Resource: "secrets", Name: "db-password",
		},
	}
	if !reflect.DeepEqual(got.Spec, want) {
		t.Fatalf("want %+v, got %+v", want, got.Spec)
	}
	// The review does not share the request's slices.
	got.Spec.Groups[0] = "changed"
	got.Spec.Extra["scopes.example.com"][0] = "changed"
	if user.Groups[0] != "team-a" || user.Extra["scopes.example.com"][0] != "read" {
		t.Fatal("the review shares the request's user info")
	}

	cm := readReview(authenticationv1.UserInfo{Username: "bob"}, "team-b", workspacesv1.ValuesFromSource{Kind: workspacesv1.ValuesSourceConfigMap, Name: "settings"})
	if ra := cm.Spec.ResourceAttributes; ra.Resource != "configmaps" || ra.Name != "settings" || ra.Namespace != "team-b" || ra.Verb != "get" || ra.Group != "" {
		t.Fatalf("a ConfigMap source is reviewed as %+v", ra)
	}
}
