package valuepath

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	cases := []struct {
		in   string
		want []string
	}{
		{"a", []string{"a"}},
		{"a.b.c", []string{"a", "b", "c"}},
		{`resources.limits["nvidia.com/gpu"]`, []string{"resources", "limits", "nvidia.com/gpu"}},
		{`a.b['amd.com/gpu']`, []string{"a", "b", "amd.com/gpu"}},
		{`["app.kubernetes.io/name"].enabled`, []string{"app.kubernetes.io/name", "enabled"}},
		{`a["x.y"]["z.w"].c`, []string{"a", "x.y", "z.w", "c"}},
		{`a["say \"hi\""]`, []string{"a", `say "hi"`}},
		{`a['it\'s']`, []string{"a", "it's"}},
		{`a["back\\slash"]`, []string{"a", `back\slash`}},
		{`a["with space"]`, []string{"a", "with space"}},
		{`a["it's"]`, []string{"a", "it's"}},
		{`a['say "hi"']`, []string{"a", `say "hi"`}},
		{"nvidia.com/gpu", []string{"nvidia", "com/gpu"}},
		{"ü-key.x_y", []string{"ü-key", "x_y"}},
		{`a.["b"]`, []string{"a", "b"}},
	}
	for _, tc := range cases {
		got, err := Parse(tc.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.in, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Parse(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		in     string
		offset int
		msg    string
	}{
		{"", 0, "empty"},
		{".a", 0, "empty key"},
		{"a..b", 2, "empty key"},
		{"a.", 2, "ends with"},
		{"a[", 1, "unterminated"},
		{"a[0]", 2, "list indexes"},
		{`a["b"`, 5, "expected ']'"},
		{`a["b`, 1, "unterminated"},
		{`a["b"x`, 5, "expected ']'"},
		{`a["b"]c`, 6, "expected '.' or '['"},
		{`a[""]`, 1, "empty quoted key"},
		{`a["b\n"]`, 4, "unknown escape"},
		{`a["b\`, 4, "backslash at the end"},
		{"a b", 1, "not allowed in a plain key"},
		{"a]b", 1, "not allowed"},
		{`a"b`, 1, "not allowed"},
		{"a\tb", 1, "not allowed"},
		{"a\xffb", 1, "UTF-8"},
	}
	for _, tc := range cases {
		_, err := Parse(tc.in)
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Errorf("Parse(%q): got %v, want a *ParseError", tc.in, err)
			continue
		}
		if pe.Offset != tc.offset || !strings.Contains(pe.Msg, tc.msg) {
			t.Errorf("Parse(%q): offset %d msg %q, want offset %d msg containing %q", tc.in, pe.Offset, pe.Msg, tc.offset, tc.msg)
		}
		if !strings.Contains(err.Error(), "offset") {
			t.Errorf("Parse(%q): error %q does not say where", tc.in, err)
		}
	}
}

func TestString(t *testing.T) {
	cases := []struct {
		in   []string
		want string
	}{
		{[]string{"a", "b"}, "a.b"},
		{[]string{"a", "nvidia.com/gpu"}, `a["nvidia.com/gpu"]`},
		{[]string{"x.y", "z"}, `["x.y"].z`},
		{[]string{"a", `q"b\`}, `a["q\"b\\"]`},
		{[]string{"a", "b c"}, `a["b c"]`},
	}
	for _, tc := range cases {
		if got := String(tc.in); got != tc.want {
			t.Errorf("String(%q) = %q, want %q", tc.in, got, tc.want)
		}
		back, err := Parse(tc.want)
		if err != nil || !reflect.DeepEqual(back, tc.in) {
			t.Errorf("Parse(String(%q)) = %q, %v", tc.in, back, err)
		}
	}
}

func TestMustParsePanicsOnInvalid(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("MustParse did not panic on an invalid path")
		}
	}()
	MustParse("a..b")
}

func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"a", "a.b.c", `a["nvidia.com/gpu"]`, `a['x\'y']`, `["a"]["b"].c`, "a..b", `a["`, `a["\\"]`, "ü.ö",
		`a[0]`, "", ".", "[", `['']`, "a\xff",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		segs, err := Parse(in)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("Parse(%q) returned %T, want *ParseError", in, err)
			}
			if pe.Offset < 0 || pe.Offset > len(in) {
				t.Fatalf("Parse(%q) offset %d out of range", in, pe.Offset)
			}
			return
		}
		if len(segs) == 0 {
			t.Fatalf("Parse(%q) returned no keys and no error", in)
		}
		for _, s := range segs {
			if s == "" {
				t.Fatalf("Parse(%q) returned an empty key", in)
			}
		}
		out := String(segs)
		back, err := Parse(out)
		if err != nil {
			t.Fatalf("Parse(String(Parse(%q))) = Parse(%q): %v", in, out, err)
		}
		if !reflect.DeepEqual(back, segs) {
			t.Fatalf("round trip of %q: %q -> %q -> %q", in, segs, out, back)
		}
		// Set then Get must find the value.
		m := map[string]any{}
		if err := Set(m, segs, 1); err != nil {
			t.Fatalf("Set(%q): %v", segs, err)
		}
		if v, ok := Get(m, segs); !ok || v != 1 {
			t.Fatalf("Get after Set(%q) = %v, %v", segs, v, ok)
		}
	})
}
