package docgen

import (
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// Slug is GitHub's anchor of a heading's text: lowercased, every character that is not a
// letter, a mark, a digit, a connector (_), a space or a hyphen removed, spaces made hyphens.
// The Markdown of the heading (code spans, links, emphasis) is reduced to its text first. A page's
// second heading of the same slug gets "-1", the third "-2" (see Headings).
func Slug(heading string) string {
	text := headingText(heading)
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || unicode.IsLetter(r) || unicode.IsMark(r) || unicode.IsDigit(r) || unicode.Is(unicode.Pc, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

var (
	mdLink     = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	mdEmphasis = regexp.MustCompile(`(\*\*|__|\*|\b_|_\b)`)
	htmlTag    = regexp.MustCompile(`<[^>]+>`)
)

// headingText is the text GitHub renders for a heading's Markdown.
func headingText(s string) string {
	var b strings.Builder
	for i, part := range strings.Split(s, "`") {
		if i%2 == 1 { // inside a code span: as is
			b.WriteString(part)
			continue
		}
		part = mdLink.ReplaceAllString(part, "$1")
		part = htmlTag.ReplaceAllString(part, "")
		part = mdEmphasis.ReplaceAllString(part, "")
		b.WriteString(part)
	}
	return strings.TrimSpace(b.String())
}

// mdLine is a line of a Markdown file outside fenced code blocks.
type mdLine struct {
	n    int // 1-based
	text string
}

// codeBlock is a fenced code block.
type codeBlock struct {
	line   int    // of the opening fence
	info   string // the info string's first word: sh, yaml, ...
	marker string // the <!-- docs:... --> comment on the line before the fence, if any
	body   string // its lines, without the indentation of the fence
}

// mdDoc is a Markdown file split into prose and code blocks.
type mdDoc struct {
	lines  []mdLine
	blocks []codeBlock
}

var (
	fenceRe  = regexp.MustCompile("^( *)(```+|~~~+)\\s*([^`\\s]*)")
	markerRe = regexp.MustCompile(`^\s*<!--\s*(docs:[a-z-]+)\s*-->\s*$`)
)

// parseMarkdown splits a Markdown file into its prose lines and fenced code blocks.
func parseMarkdown(src string) mdDoc {
	var d mdDoc
	lines := strings.Split(src, "\n")
	for i := 0; i < len(lines); i++ {
		m := fenceRe.FindStringSubmatch(lines[i])
		if m == nil {
			d.lines = append(d.lines, mdLine{n: i + 1, text: lines[i]})
			continue
		}
		indent, fence := len(m[1]), m[2]
		blk := codeBlock{line: i + 1, info: strings.ToLower(m[3])}
		if i > 0 {
			if mm := markerRe.FindStringSubmatch(lines[i-1]); mm != nil {
				blk.marker = mm[1]
			}
		}
		var body []string
		for i++; i < len(lines); i++ {
			t := strings.TrimLeft(lines[i], " ")
			if strings.HasPrefix(t, fence[:3]) && strings.TrimSpace(strings.TrimLeft(t, fence[:1])) == "" && len(t)-len(strings.TrimLeft(t, fence[:1])) >= len(fence) {
				break
			}
			l := lines[i]
			for k := 0; k < indent && strings.HasPrefix(l, " "); k++ {
				l = l[1:]
			}
			body = append(body, l)
		}
		blk.body = strings.Join(body, "\n")
		d.blocks = append(d.blocks, blk)
	}
	return d
}

var (
	atxHeading = regexp.MustCompile(`^ {0,3}(#{1,6})(?:\s+(.*?))?(?:\s+#+)?\s*$`)
	setextLine = regexp.MustCompile(`^ {0,3}(=+|-+)\s*$`)
	htmlAnchor = regexp.MustCompile(`<a\s+(?:[^>]*\s)?(?:id|name)="([^"]+)"`)
)

// anchors returns the anchors of a Markdown file: the slugs of its headings (ATX and setext,
// duplicates numbered as GitHub does) and the ids and names of its HTML anchors.
func (d mdDoc) anchors() map[string]bool {
	out := map[string]bool{}
	count := map[string]int{}
	add := func(heading string) {
		s := Slug(heading)
		if n := count[s]; n > 0 {
			count[s]++
			s = s + "-" + strconv.Itoa(n)
		} else {
			count[s] = 1
		}
		out[s] = true
	}
	for i, l := range d.lines {
		if m := atxHeading.FindStringSubmatch(l.text); m != nil {
			add(m[2])
		} else if i > 0 && setextLine.MatchString(l.text) && d.lines[i-1].n == l.n-1 && isParagraphLine(d.lines[i-1].text) {
			add(strings.TrimSpace(d.lines[i-1].text))
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(l.text, -1) {
			out[m[1]] = true
		}
	}
	return out
}

// isParagraphLine reports whether a line can be the text of a setext heading.
func isParagraphLine(s string) bool {
	t := strings.TrimSpace(s)
	return t != "" && !strings.HasPrefix(t, "|") && !strings.HasPrefix(t, "- ") && !strings.HasPrefix(t, "* ") &&
		!strings.HasPrefix(t, "#") && !strings.HasPrefix(t, ">") && !strings.HasPrefix(t, "<") && !setextLine.MatchString(s)
}

// link is a link or image target in a Markdown file.
type link struct {
	line   int
	target string
}

var (
	inlineLink = regexp.MustCompile(`!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|[^\s)]+)(?:\s+"[^"]*")?\s*\)`)
	refDef     = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:\s*(\S+)`)
	htmlLink   = regexp.MustCompile(`<(?:a|img)\s[^>]*(?:href|src)="([^"]*)"`)
	codeSpan   = regexp.MustCompile("`+[^`]*`+")
)

// links returns the link targets of the prose of a Markdown file (inline links and images,
// reference definitions, HTML a and img), not those in code spans or blocks.
func (d mdDoc) links() []link {
	var out []link
	for _, l := range d.lines {
		text := codeSpan.ReplaceAllStringFunc(l.text, func(s string) string { return strings.Repeat(" ", len(s)) })
		for _, m := range inlineLink.FindAllStringSubmatch(text, -1) {
			out = append(out, link{line: l.n, target: strings.Trim(m[1], "<>")})
		}
		if m := refDef.FindStringSubmatch(text); m != nil {
			out = append(out, link{line: l.n, target: strings.Trim(m[1], "<>")})
		}
		for _, m := range htmlLink.FindAllStringSubmatch(text, -1) {
			out = append(out, link{line: l.n, target: m[1]})
		}
	}
	return out
}
