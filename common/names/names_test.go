package names

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestBoundedKeepsShortNames(t *testing.T) {
	cases := []struct {
		max   int
		parts []string
		want  string
	}{
		{63, []string{"colony", "gpu-east"}, "colony-gpu-east"},
		{63, []string{"single"}, "single"},
		{63, nil, ""},
		{15, []string{"colony", "gpu-east"}, "colony-gpu-east"}, // exactly max
	}
	for _, c := range cases {
		if got := Bounded(c.max, c.parts...); got != c.want {
			t.Errorf("Bounded(%d, %q) = %q, want %q", c.max, c.parts, got, c.want)
		}
	}
}

func TestBoundedCutsLongNamesWithHash(t *testing.T) {
	long := strings.Repeat("a", 70)
	got := Bounded(63, long, "cluster")
	if len(got) != 63 {
		t.Fatalf("len = %d, want 63: %q", len(got), got)
	}
	// 54 characters of prefix, a dash, then 8 hex characters.
	if !strings.HasPrefix(got, strings.Repeat("a", 54)+"-") {
		t.Errorf("prefix not kept: %q", got)
	}
	if got != Bounded(63, long, "cluster") {
		t.Errorf("not deterministic")
	}
	if Bounded(63, long, "cluster") == Bounded(63, long, "cluster2") {
		t.Errorf("different long names collapsed into one: %q", got)
	}
	if errs := validation.IsDNS1123Label(got); len(errs) > 0 {
		t.Errorf("%q is not a DNS label: %v", got, errs)
	}
}

func TestBoundedNeverEndsPrefixInDashOrDot(t *testing.T) {
	// The cut lands right after "-" and "." characters.
	name := strings.Repeat("b", 52) + "-.-" + strings.Repeat("c", 20)
	got := Bounded(63, name)
	if strings.Contains(got, "--") || strings.Contains(got, ".-") {
		t.Errorf("cut left a separator before the hash: %q", got)
	}
	if !strings.HasPrefix(got, strings.Repeat("b", 52)+"-") || len(got) != 52+1+8 {
		t.Errorf("unexpected result %q", got)
	}
	// A prefix made only of separators is dropped: the hash alone remains.
	if got := Bounded(20, strings.Repeat("-", 40)); len(got) != 8 || strings.ContainsAny(got, "-.") {
		t.Errorf("all-separator prefix: %q", got)
	}
}

func TestBoundedTinyMax(t *testing.T) {
	long := strings.Repeat("x", 30)
	for max := -1; max <= 10; max++ {
		got := Bounded(max, long)
		if len(got) > max && (max >= 0 || got != "") {
			t.Errorf("Bounded(%d) = %q is longer than max", max, got)
		}
		if strings.HasSuffix(got, "-") || strings.HasSuffix(got, ".") {
			t.Errorf("Bounded(%d) = %q ends in a separator", max, got)
		}
	}
	if got := Bounded(9, long); len(got) != 8 {
		t.Errorf("Bounded(9) = %q, want the bare 8-character hash", got)
	}
	if got := Bounded(10, long); got != "x-"+Bounded(8, long) {
		t.Errorf("Bounded(10) = %q, want one prefix character, a dash and the hash", got)
	}
}

func TestDNSLabelAndHelmRelease(t *testing.T) {
	parts := []string{strings.Repeat("workspace", 5), "jupyternotebook", "0-3-0"}
	if got := DNSLabel(parts...); len(got) != DNSLabelMax {
		t.Errorf("DNSLabel length %d, want %d", len(got), DNSLabelMax)
	}
	if got := HelmRelease(parts...); len(got) != HelmReleaseMax {
		t.Errorf("HelmRelease length %d, want %d", len(got), HelmReleaseMax)
	}
	if got := HelmRelease("ws", "demo"); got != "ws-demo" {
		t.Errorf("HelmRelease short = %q", got)
	}
}

func FuzzBounded(f *testing.F) {
	f.Add(63, "colony", "cluster-a", "other")
	f.Add(53, strings.Repeat("a", 60), "b", "c")
	f.Add(10, "x.y", "-", "--")
	f.Add(0, "", "", "")
	f.Fuzz(func(t *testing.T, max int, a, b, c string) {
		if max > 1000 || max < -10 {
			max %= 1000
		}
		got := Bounded(max, a, b)
		if len(got) > max && got != "" {
			t.Fatalf("Bounded(%d, %q, %q) = %q: longer than max", max, a, b, got)
		}
		if got != Bounded(max, a, b) {
			t.Fatalf("not deterministic")
		}
		full := a + "-" + b
		if len(full) > max && max > hashLen && (strings.HasSuffix(got, "-") || strings.HasSuffix(got, ".")) {
			t.Fatalf("cut name %q ends in a separator", got)
		}
		// A name built from DNS labels is a DNS label.
		if max >= 1 && max <= DNSLabelMax && len(validation.IsDNS1123Label(a)) == 0 && len(validation.IsDNS1123Label(b)) == 0 {
			if errs := validation.IsDNS1123Label(got); len(errs) > 0 {
				t.Fatalf("Bounded(%d, %q, %q) = %q is not a DNS label: %v", max, a, b, got, errs)
			}
		}
		// Distinct long inputs give distinct outputs (when the bound leaves room for the hash).
		other := a + "-" + c
		if max > hashLen && full != other && len(full) > max && len(other) > max {
			if got == Bounded(max, a, c) {
				t.Fatalf("%q and %q both became %q", full, other, got)
			}
		}
	})
}

func TestShortHash(t *testing.T) {
	a, b := ShortHash("team/x"), ShortHash("team-x/")
	if len(a) != 8 || a == b || ShortHash("team/x") != a {
		t.Fatalf("ShortHash: %q, %q", a, b)
	}
}

func TestNamespaceQualifier(t *testing.T) {
	a, again := NamespaceQualifier("team-a"), NamespaceQualifier("team-a")
	if a != again || len(a) != 5 || a == NamespaceQualifier("team-b") {
		t.Fatalf("qualifiers: %q %q %q", a, again, NamespaceQualifier("team-b"))
	}
	if !EndsInQualifier("notebook-" + a) {
		t.Fatalf("notebook-%s does not read as qualified", a)
	}
}

func TestEndsInQualifier(t *testing.T) {
	for name, want := range map[string]bool{
		"notebook-0a1b2": true, "x-fffff": true, "exp-12345": true,
		"notebook": false, "notebook-0a1b": false, "notebook-0a1b2c": false, "notebook-0A1B2": false,
		"notebook-0a1g2": false, "notebook0a1b2": false, "-0a1b2": false, "": false, "llama-7b": false,
	} {
		if got := EndsInQualifier(name); got != want {
			t.Errorf("EndsInQualifier(%q) = %v, want %v", name, got, want)
		}
	}
}
