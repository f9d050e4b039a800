package components

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// Every listed component is a folder of the repository with its own module and main package, and
// no component folder is missing from the list.
func TestNamesAreTheComponentFolders(t *testing.T) {
	got := Names()
	if len(got) == 0 || len(got) != len(slices.Compact(slices.Sorted(slices.Values(got)))) {
		t.Fatalf("Names() = %q: empty or with duplicates", got)
	}
	root := filepath.Join("..", "..")
	for _, c := range got {
		for _, f := range []string{"go.mod", "main.go"} {
			if _, err := os.Stat(filepath.Join(root, c, f)); err != nil {
				t.Errorf("component %s: %v", c, err)
			}
		}
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(root, e.Name(), "main.go")); err == nil && !slices.Contains(got, e.Name()) && e.Name() != Plugin {
			t.Errorf("folder %s has a main package but is not in the components list", e.Name())
		}
	}
}
