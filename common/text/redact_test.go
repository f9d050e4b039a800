package text

import (
	"strings"
	"testing"
)

func TestRedact(t *testing.T) {
	secrets := []string{"hunter2-password", `p"q\r`, "abc", "hunter2"}
	for _, tc := range []struct{ in, want string }{
		{"error: password hunter2-password rejected", "error: password [redacted] rejected"},
		{`{"message":"bad value p\"q\\r"}`, `{"message":"bad value [redacted]"}`},
		{`bad value "p\"q\\r"`, `bad value "[redacted]"`},
		{"abc is too short to count", "abc is too short to count"},
		{"hunter2 and hunter2-password", "[redacted] and [redacted]"},
		{"", ""},
	} {
		if got := Redact(tc.in, secrets); got != tc.want {
			t.Errorf("Redact(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got := Redact("nothing", nil); got != "nothing" {
		t.Errorf("no secrets: %q", got)
	}
}

func FuzzRedact(f *testing.F) {
	f.Add("the value s3cr3t-token was refused", "s3cr3t-token")
	f.Add(`{"a":"x\"y"}`, `x"yzz`)
	f.Fuzz(func(t *testing.T, s, secret string) {
		out := Redact(s, []string{secret})
		// A secret with a bracket could be formed anew at the edge of a Redacted marker.
		if len(secret) >= MinRedactLen && !strings.ContainsAny(secret, "[]") && !strings.Contains(Redacted, secret) && strings.Contains(out, secret) {
			t.Fatalf("secret %q left in %q", secret, out)
		}
	})
}
