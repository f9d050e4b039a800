package chaos

import (
	"strings"
	"testing"
	"time"
)

func TestReplaceSection(t *testing.T) {
	cases := []struct{ name, doc, want string }{
		{"missing file", "", "# Benchmarks\n\n## C\n\nnew\n"},
		{"appended", "# B\n\n## Other\n\nx\n", "# B\n\n## Other\n\nx\n\n## C\n\nnew\n"},
		{"replaced, others kept", "# B\n\n## C\n\nold\nold2\n\n## Other\n\nx\n", "# B\n\n## C\n\nnew\n\n## Other\n\nx\n"},
		{"replaced at the end", "# B\n\n## Other\n\nx\n\n## C\n\nold\n", "# B\n\n## Other\n\nx\n\n## C\n\nnew\n"},
		{"a level-3 heading stays in the section", "## C\n\nold\n### sub\nold\n## D\n", "## C\n\nnew\n\n## D\n"},
	}
	for _, c := range cases {
		if got := ReplaceSection(c.doc, "## C", "new\n"); got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
}

func TestMarkdownNamesEveryFigure(t *testing.T) {
	f := Figures{Seed: 42, Mode: "full", Rounds: 20, Workspaces: 200, Faults: map[string]int{"kill-webhook": 3},
		LongestConvergence: 90 * time.Second, Lost: 1, DoubleBooked: 2, StoppedHoldingGPUs: 4, QueueInversions: 5, Findings: []string{"round 3: x\ny"}}
	md := f.Markdown()
	for _, want := range []string{"seed 42", "CHAOS_SEED=42", "| rounds | 20 |", "| faults: kill-webhook | 3 |", "1m30s", "| double-booked GPU samples | 2 |",
		"| samples of a Stopped workspace holding a GPU on its child | 4 |", "| queue-order inversions | 5 |", "- round 3: x y"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(Figures{}.Markdown(), "Failed checks") {
		t.Error("no findings rendered as failed checks")
	}
}

func TestScheduleReplays(t *testing.T) {
	a, b := NewSchedule(7), NewSchedule(7)
	for i := 0; i < 50; i++ {
		if x, y := a.Intn(200), b.Intn(200); x != y {
			t.Fatalf("same seed, draw %d: %d != %d", i, x, y)
		}
	}
	if NewSchedule(1).Intn(0) != 0 {
		t.Error("Intn(0) must be 0")
	}
}
