package helmvalues

import "strings"

// templateLeftDelim opens an action in Go's text/template.
const templateLeftDelim = "{{"

// escapedLeftDelim is an action that renders the left delimiter itself.
const escapedLeftDelim = `{{"{{"}}`

// EscapeTemplate escapes text so that rendering it as a Go text/template, with any data and any
// functions, gives back text: every "{{" becomes an action printing "{{". Sveltos renders the
// values of a Helm chart (and of valuesFrom sources marked as templates) this way before it installs
// the chart; escaped values reach the chart verbatim.
//
// Replacing left to right leaves no "{{" outside the inserted actions, and no text ends with "{"
// right before one, so the parser sees only the inserted actions; they carry no trim markers.
func EscapeTemplate(text string) string {
	return strings.ReplaceAll(text, templateLeftDelim, escapedLeftDelim)
}
