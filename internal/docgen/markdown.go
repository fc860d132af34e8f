package docgen

import (
	"strings"
)

// Cell renders text for a Markdown table cell: lines of a paragraph joined, paragraphs (and the
// items of an indented list, and the lines of an indented block, as code) separated by <br>, "|" escaped everywhere, and outside code spans
// "<", "*" and "\" escaped so that they show as written.
func Cell(text string) string {
	var paras []string
	var cur []string
	flush := func() {
		if len(cur) > 0 {
			paras = append(paras, strings.Join(cur, " "))
			cur = nil
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case trimmed == "":
			flush()
		case line != trimmed && (strings.HasPrefix(trimmed, "- ") || strings.HasPrefix(trimmed, "* ")):
			flush() // an item of an indented list starts a line of its own
			cur = append(cur, "• "+strings.TrimSpace(trimmed[2:]))
		case line != trimmed && !strings.Contains(trimmed, "`"):
			flush() // a line of an indented (code) block: a line of its own, as code
			paras = append(paras, "`"+trimmed+"`")
		default:
			cur = append(cur, trimmed)
		}
	}
	flush()
	for i, p := range paras {
		paras[i] = escapeInline(p)
	}
	return strings.Join(paras, "<br>")
}

// escapeInline escapes text for a table cell (see Cell).
func escapeInline(s string) string {
	var b strings.Builder
	inCode := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '`':
			// A code span needs its closing backquote; a lone one is shown as is.
			if inCode || strings.IndexByte(s[i+1:], '`') >= 0 {
				inCode = !inCode
				b.WriteByte(c)
			} else {
				b.WriteString("\\`")
			}
		case c == '|':
			b.WriteString(`\|`)
		case inCode:
			b.WriteByte(c)
		case c == '<':
			b.WriteString("&lt;")
		case c == '*' || c == '\\' || c == '_' && wordUnderscore(s, i):
			b.WriteByte('\\')
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// wordUnderscore reports whether the underscore at i could open or close emphasis (it is not
// between two word characters).
func wordUnderscore(s string, i int) bool {
	return !(i > 0 && isIdentByte(s[i-1]) && i+1 < len(s) && isIdentByte(s[i+1]))
}

// Code renders s as a Markdown code span.
func Code(s string) string {
	if s == "" {
		return ""
	}
	if strings.Contains(s, "`") {
		return "`` " + s + " ``"
	}
	return "`" + s + "`"
}

// Table renders a Markdown table; the cells are used as they are.
func Table(header []string, rows [][]string) string {
	var b strings.Builder
	b.WriteString("| " + strings.Join(header, " | ") + " |\n|")
	for range header {
		b.WriteString(" --- |")
	}
	b.WriteString("\n")
	for _, r := range rows {
		b.WriteString("| " + strings.Join(r, " | ") + " |\n")
	}
	return b.String()
}
