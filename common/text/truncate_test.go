package text

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTruncate(t *testing.T) {
	cases := []struct {
		s    string
		n    int
		want string
	}{
		{"", 5, ""},
		{"abc", 3, "abc"},
		{"abcd", 3, "abc"},
		{"abcdef", 5, "ab..."},
		{"abcdefgh", 6, "abc..."},
		// "é" is two bytes: a cut in its middle drops it whole.
		{"héllo world", 4, "h..."},
		{"héllo world", 5, "h..."},
		{"héllo world", 6, "hé..."},
		{"héllo", 2, "h"},
		{"héllo", 3, "hé"},
		// "€" is three bytes, "😀" four.
		{"a€bcdefg", 5, "a..."},
		{"a€bcdefg", 7, "a€..."},
		{"😀😀😀", 6, "..."},
		{"😀😀😀", 7, "😀..."},
		{"😀😀😀", 10, "😀..."},
		{"😀😀😀", 11, "😀😀..."},
		{"😀", 3, ""},
		{"abc", 0, ""},
		{"abc", -1, ""},
	}
	for _, tc := range cases {
		if got := Truncate(tc.s, tc.n); got != tc.want {
			t.Errorf("Truncate(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}

// FuzzTruncate: any input and bound give at most n bytes (n >= 0), a prefix of s (less the marker),
// s itself when it fits, and valid UTF-8 from valid UTF-8.
func FuzzTruncate(f *testing.F) {
	f.Add("héllo wörld 😀", 7)
	f.Add("abc", 2)
	f.Add("\xff\xfe€", 2)
	f.Fuzz(func(t *testing.T, s string, n int) {
		got := Truncate(s, n)
		if n >= 0 && len(got) > n {
			t.Fatalf("Truncate(%q, %d) = %q: %d bytes", s, n, got, len(got))
		}
		if len(s) <= n && got != s {
			t.Fatalf("Truncate(%q, %d) = %q, want s unchanged", s, n, got)
		}
		if !strings.HasPrefix(s, strings.TrimSuffix(got, Ellipsis)) {
			t.Fatalf("Truncate(%q, %d) = %q is not a prefix of s", s, n, got)
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("Truncate(%q, %d) = %q split a character", s, n, got)
		}
	})
}
