package crdtests

import "testing"

// TestWorkspaceQuotaValidation: a GPU entry's guarantee is at most its limit; guarantees and
// borrowing limits are not negative; a vendor and model appear once.
func TestWorkspaceQuotaValidation(t *testing.T) {
	ns := createNamespace(t, "crd-wsq")
	cases := []validationCase{
		{name: "limit only", spec: `{"gpus":[{"vendor":"NVIDIA","limit":8}]}`},
		{name: "guaranteed and borrowingLimit", spec: `{"gpus":[{"vendor":"NVIDIA","limit":8,"guaranteed":4,"borrowingLimit":2}]}`},
		{name: "guaranteed equal to the limit", spec: `{"gpus":[{"vendor":"NVIDIA","limit":8,"guaranteed":8}]}`},
		{name: "guaranteed above the limit", spec: `{"gpus":[{"vendor":"NVIDIA","limit":8,"guaranteed":9}]}`,
			want: []string{"spec.gpus[0]", "spec.gpus[].guaranteed may not exceed limit"}},
		{name: "guaranteed negative", spec: `{"gpus":[{"vendor":"NVIDIA","limit":8,"guaranteed":-1}]}`,
			want: []string{"spec.gpus[0].guaranteed", "greater than or equal to 0"}},
		{name: "borrowingLimit negative", spec: `{"gpus":[{"vendor":"NVIDIA","limit":8,"borrowingLimit":-1}]}`,
			want: []string{"spec.gpus[0].borrowingLimit", "greater than or equal to 0"}},
		{name: "a vendor twice", spec: `{"gpus":[{"vendor":"NVIDIA","limit":8},{"vendor":"NVIDIA","limit":4}]}`,
			want: []string{"spec.gpus: each vendor and model appears at most once"}},
	}
	runCases(t, workspacesAPI, "WorkspaceQuota", ns, cases)
}
