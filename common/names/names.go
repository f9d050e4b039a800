// Package names builds deterministic, length-bounded Kubernetes object names.
//
// Names the controllers derive from user input (a Colony name plus a cluster name, a workspace name
// plus a namespace prefix) can exceed what Kubernetes or Helm accepts. Bounded keeps short names
// readable and unchanged, and cuts long ones to a fixed length that ends in a hash of the full name,
// so two different long names never collapse into one and the same input always gives the same name.
package names

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

const (
	// DNSLabelMax is the longest RFC 1123 DNS label: namespace names, Service names, label values.
	DNSLabelMax = 63
	// HelmReleaseMax is the longest Helm release name Helm accepts.
	HelmReleaseMax = 53
	// hashLen is the number of hex characters of the SHA-256 of the full name appended when cut.
	hashLen = 8
)

// Bounded joins parts with "-" and returns the result unchanged when it has at most max characters.
// A longer name is cut to max characters: a prefix of the joined name, then "-", then the first 8 hex
// characters of the SHA-256 of the whole joined name. The prefix never ends in '-' or '.', so a name
// built from DNS labels stays a DNS label. When max is too small to hold a prefix and the hash, the
// result is the hash cut to max characters; a max of zero or less gives "".
func Bounded(max int, parts ...string) string {
	full := strings.Join(parts, "-")
	if len(full) <= max {
		return full
	}
	if max <= 0 {
		return ""
	}
	sum := sha256.Sum256([]byte(full))
	hash := hex.EncodeToString(sum[:])[:hashLen]
	if max <= hashLen+1 {
		return hash[:min(max, hashLen)]
	}
	prefix := strings.TrimRight(full[:max-hashLen-1], "-.")
	if prefix == "" {
		return hash
	}
	return prefix + "-" + hash
}

// DNSLabel returns Bounded(63, parts...): a name usable for namespaces, Services and most objects.
func DNSLabel(parts ...string) string {
	return Bounded(DNSLabelMax, parts...)
}

// HelmRelease returns Bounded(53, parts...): a name Helm accepts for a release.
func HelmRelease(parts ...string) string {
	return Bounded(HelmReleaseMax, parts...)
}

// ShortHash returns the first 8 hex characters of the SHA-256 of s: a suffix that keeps names built
// by joining parts with "-" apart ("team" + "x" and "team-x" + "").
func ShortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:hashLen]
}

// qualifierLen is the number of hex characters of a namespace qualifier.
const qualifierLen = 5

// NamespaceQualifier is the short, stable suffix that sets a workspace apart from a same-named
// workspace of another namespace where both share one name space (a child cluster, a Gateway): the
// first 5 hex characters of the SHA-256 of its namespace.
func NamespaceQualifier(namespace string) string {
	sum := sha256.Sum256([]byte(namespace))
	return hex.EncodeToString(sum[:])[:qualifierLen]
}

// EndsInQualifier reports whether name ends in "-" and 5 lower-case hex characters: the shape of a
// name that a namespace qualifier was appended to. A workspace name of that shape is never given a
// short (unqualified) name where qualified names live, so that no workspace can take the qualified
// name of a same-named workspace of another namespace by naming itself after it.
func EndsInQualifier(name string) bool {
	if len(name) < qualifierLen+2 || name[len(name)-qualifierLen-1] != '-' {
		return false
	}
	for _, c := range name[len(name)-qualifierLen:] {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
