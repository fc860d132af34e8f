// Package clip shortens text for logs, answers and statuses without cutting a character in two.
package clip

// String shortens s to at most n bytes plus "..." when it is longer, at a UTF-8 boundary.
func String(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 { // do not cut a multi-byte character
		n--
	}
	return s[:n] + "..."
}
