// Package valuepath parses and applies Helm value paths.
//
// A path is a list of keys separated by dots, the same syntax `helm --set` uses for maps:
//
//	resources.limits.cpu
//
// Keys that hold a dot (or any other character a plain key may not hold) are written as quoted bracket
// segments, in double or single quotes, with a backslash escaping the quote and the backslash itself:
//
//	resources.limits["nvidia.com/gpu"]
//	['app.kubernetes.io/name'].enabled
//	a["say \"hi\""]
//
// A plain key is a non-empty run of characters other than '.', '[', ']', quotes, backslashes,
// whitespace and control characters. Bracket segments hold any non-empty valid UTF-8 text. Paths
// address maps only: list indexes are not supported, because resource injection writes scalars into
// map-shaped values.
package valuepath

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ParseError says where and why a path does not parse.
type ParseError struct {
	// Path is the input.
	Path string
	// Offset is the byte offset of the problem in Path.
	Offset int
	// Msg describes the problem.
	Msg string
}

// Error implements error.
func (e *ParseError) Error() string {
	return fmt.Sprintf("invalid value path %q at offset %d: %s", e.Path, e.Offset, e.Msg)
}

// Parse splits a path into its keys. Every key is non-empty.
func Parse(path string) ([]string, error) {
	p := parser{in: path}
	return p.parse()
}

// MustParse is Parse for paths known to be valid (constants in code); it panics on error.
func MustParse(path string) []string {
	segs, err := Parse(path)
	if err != nil {
		panic(err)
	}
	return segs
}

type parser struct {
	in  string
	pos int
}

func (p *parser) fail(offset int, format string, args ...any) error {
	return &ParseError{Path: p.in, Offset: offset, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) parse() ([]string, error) {
	if p.in == "" {
		return nil, p.fail(0, "path is empty")
	}
	if !utf8.ValidString(p.in) {
		return nil, p.fail(firstInvalidUTF8(p.in), "path is not valid UTF-8")
	}
	var segs []string
	// expectKey is true at the start and right after a dot: a plain key or a bracket must follow.
	expectKey := true
	for p.pos < len(p.in) {
		c := p.in[p.pos]
		switch c {
		case '[':
			seg, err := p.bracket()
			if err != nil {
				return nil, err
			}
			segs = append(segs, seg)
			expectKey = false
		case '.':
			if expectKey {
				return nil, p.fail(p.pos, "empty key before '.'")
			}
			p.pos++
			expectKey = true
			if p.pos == len(p.in) {
				return nil, p.fail(p.pos, "path ends with '.'")
			}
		default:
			if !expectKey {
				return nil, p.fail(p.pos, "expected '.' or '[' after ']', found %q", p.peekRune())
			}
			seg, err := p.plain()
			if err != nil {
				return nil, err
			}
			segs = append(segs, seg)
			expectKey = false
		}
	}
	return segs, nil
}

func (p *parser) peekRune() rune {
	r, _ := utf8.DecodeRuneInString(p.in[p.pos:])
	return r
}

// plain reads a plain key up to the next '.', '[' or the end.
func (p *parser) plain() (string, error) {
	start := p.pos
	for p.pos < len(p.in) {
		r, size := utf8.DecodeRuneInString(p.in[p.pos:])
		if r == '.' || r == '[' {
			break
		}
		if !plainRune(r) {
			return "", p.fail(p.pos, "character %q is not allowed in a plain key; quote the key in brackets: [\"...\"]", r)
		}
		p.pos += size
	}
	return p.in[start:p.pos], nil
}

// bracket reads a quoted bracket segment starting at '['.
func (p *parser) bracket() (string, error) {
	open := p.pos
	p.pos++ // '['
	if p.pos >= len(p.in) {
		return "", p.fail(open, "unterminated '['")
	}
	quote := p.in[p.pos]
	if quote != '"' && quote != '\'' {
		return "", p.fail(p.pos, "expected a quote after '[', found %q (list indexes are not supported)", p.peekRune())
	}
	p.pos++
	var b strings.Builder
	for {
		if p.pos >= len(p.in) {
			return "", p.fail(open, "unterminated quoted key")
		}
		c := p.in[p.pos]
		switch c {
		case '\\':
			if p.pos+1 >= len(p.in) {
				return "", p.fail(p.pos, "backslash at the end of the path")
			}
			next := p.in[p.pos+1]
			if next != '\\' && next != '"' && next != '\'' {
				return "", p.fail(p.pos, "unknown escape \\%c; only \\\\, \\\" and \\' are allowed", rune(next))
			}
			b.WriteByte(next)
			p.pos += 2
		case quote:
			p.pos++
			if p.pos >= len(p.in) || p.in[p.pos] != ']' {
				return "", p.fail(p.pos, "expected ']' after the closing quote")
			}
			p.pos++
			if b.Len() == 0 {
				return "", p.fail(open, "empty quoted key")
			}
			return b.String(), nil
		default:
			b.WriteByte(c)
			p.pos++
		}
	}
}

func plainRune(r rune) bool {
	switch r {
	case '.', '[', ']', '"', '\'', '\\':
		return false
	}
	return !unicode.IsSpace(r) && !unicode.IsControl(r) && r != utf8.RuneError
}

func firstInvalidUTF8(s string) int {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size <= 1 {
			return i
		}
		i += size
	}
	return len(s)
}

// String writes keys back as a path that Parse reads as the same keys: plain keys as they are, every
// other key in double-quoted brackets.
func String(segs []string) string {
	var b strings.Builder
	for i, s := range segs {
		if isPlain(s) {
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s)
			continue
		}
		b.WriteString(`["`)
		for j := 0; j < len(s); j++ {
			if s[j] == '"' || s[j] == '\\' {
				b.WriteByte('\\')
			}
			b.WriteByte(s[j])
		}
		b.WriteString(`"]`)
	}
	return b.String()
}

func isPlain(s string) bool {
	if s == "" || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !plainRune(r) {
			return false
		}
	}
	return true
}
