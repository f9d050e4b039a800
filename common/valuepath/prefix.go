package valuepath

import "slices"

// HasPrefix reports whether the parsed path keys starts with the parsed path prefix: whether the
// value at prefix holds (or is) the value at keys. A path is a prefix of itself.
func HasPrefix(keys, prefix []string) bool {
	return len(prefix) <= len(keys) && slices.Equal(keys[:len(prefix)], prefix)
}
