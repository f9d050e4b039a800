// Package text holds small string helpers the components share.
package text

import "unicode/utf8"

// Ellipsis marks where Truncate cut a string.
const Ellipsis = "..."

// MaxEventNoteBytes is the longest note (message) the events.k8s.io/v1 API accepts. The API server
// refuses a longer Event as a whole and client-go drops it silently, so every note is cut to it.
const MaxEventNoteBytes = 1024

// Truncate returns s when it is at most n bytes long. A longer s is cut to at most n bytes, the
// Ellipsis included, at a character boundary: a multi-byte UTF-8 character is dropped whole, never
// split, so valid UTF-8 stays valid. When n leaves no room for the Ellipsis (n <= 3), s is cut to n
// bytes without it; n <= 0 gives "".
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	marker := Ellipsis
	if n <= len(Ellipsis) {
		marker = ""
	}
	cut := n - len(marker)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + marker
}
