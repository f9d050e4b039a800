package valuepath

import "testing"

func TestHasPrefix(t *testing.T) {
	cases := []struct {
		keys, prefix []string
		want         bool
	}{
		{[]string{"a", "b"}, []string{"a"}, true},
		{[]string{"a", "b"}, []string{"a", "b"}, true},
		{[]string{"a", "b"}, nil, true},
		{[]string{"a"}, []string{"a", "b"}, false},
		{[]string{"a", "b"}, []string{"b"}, false},
		{[]string{"ab", "c"}, []string{"a"}, false},
		// Keys compare whole: "a.b" as one key is not the keys a and b.
		{[]string{"a.b", "c"}, []string{"a", "b"}, false},
	}
	for _, tc := range cases {
		if got := HasPrefix(tc.keys, tc.prefix); got != tc.want {
			t.Errorf("HasPrefix(%q, %q) = %t, want %t", tc.keys, tc.prefix, got, tc.want)
		}
	}
}
