package workspace

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/types"

	"github.com/exalsius/exalsius-operator/common/text"
)

// TestCleanupIncompleteNote: the note names what was left before the cause, names the cause once, and
// never exceeds what the Event API accepts (a longer note loses the whole Event), however long the
// names and the child's error are.
func TestCleanupIncompleteNote(t *testing.T) {
	cd := types.NamespacedName{Namespace: "team-a", Name: "gpu-cluster"}
	cause := errors.New("child cluster team-a/gpu-cluster is unreachable (Unhealthy): connection refused")
	note := cleanupIncompleteNote(3*time.Second, cd, []string{"ServiceSet team-a/x is still being deleted", "namespace ws-x on the child was not deleted"}, cause)
	for _, want := range []string{"3s", "team-a/gpu-cluster", "ServiceSet team-a/x", "namespace ws-x", "connection refused"} {
		if !strings.Contains(note, want) {
			t.Errorf("note %q lacks %q", note, want)
		}
	}
	if n := strings.Count(note, "connection refused"); n != 1 {
		t.Errorf("the cause is named %d times in %q, want once", n, note)
	}

	long := strings.Repeat("é", 200) // two bytes each, names and errors as long as the API allows
	cd = types.NamespacedName{Namespace: strings.Repeat("n", 63), Name: strings.Repeat("c", 253)}
	left := []string{"ServiceSet " + cd.Namespace + "/" + strings.Repeat("s", 253) + " is still being deleted", "namespace ws-" + strings.Repeat("w", 60) + " on the child was not deleted"}
	note = cleanupIncompleteNote(time.Minute, cd, left, errors.New(strings.Repeat(long, 5)))
	if len(note) > text.MaxEventNoteBytes || !utf8.ValidString(note) {
		t.Fatalf("note of %d bytes (valid UTF-8: %t), want at most %d", len(note), utf8.ValidString(note), text.MaxEventNoteBytes)
	}
	if !strings.Contains(note, left[0]) || !strings.Contains(note, left[1]) {
		t.Errorf("what was left must survive the cut: %q", note)
	}
}
