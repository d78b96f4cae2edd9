package publisher

// A line is routed to the events subject when it is JSON and to the raw
// subject otherwise, so every line is validated. validJSON gives exactly
// json.Valid's answer (the fuzz test compares them) without its scanner's
// per-byte function calls: on 200-byte agent lines it is several times
// faster (BenchmarkValidJSON).

// maxJSONDepth is encoding/json's nesting limit: deeper input is not
// valid to it.
const maxJSONDepth = 10000

// jsonStringStop marks the bytes a string scan must look at: the end
// quote, an escape, and control characters (invalid in a string).
var jsonStringStop = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// validJSON reports whether b is exactly one JSON value, with optional
// whitespace around it: what json.Valid reports. Like it, it accepts any
// bytes of 0x80 and up inside strings (it does not check UTF-8).
func validJSON(b []byte) bool {
	var buf [64]byte
	stack := buf[:0] // '{' or '[' of each open container
	n := len(b)
	i := 0
value:
	i = skipSpace(b, i)
	if i >= n {
		return false
	}
	switch c := b[i]; {
	case c == '{' || c == '[':
		if len(stack) == maxJSONDepth {
			return false
		}
		stack = append(stack, c)
		i = skipSpace(b, i+1)
		if i < n && b[i] == c+2 { // '}' is '{'+2, ']' is '['+2
			stack = stack[:len(stack)-1]
			i++
			goto after
		}
		if c == '{' {
			goto key
		}
		goto value
	case c == '"':
		if i = scanString(b, i); i < 0 {
			return false
		}
	case c == '-' || c >= '0' && c <= '9':
		if i = scanNumber(b, i); i < 0 {
			return false
		}
	case c == 't':
		if i = scanLiteral(b, i, "true"); i < 0 {
			return false
		}
	case c == 'f':
		if i = scanLiteral(b, i, "false"); i < 0 {
			return false
		}
	case c == 'n':
		if i = scanLiteral(b, i, "null"); i < 0 {
			return false
		}
	default:
		return false
	}
after:
	i = skipSpace(b, i)
	if len(stack) == 0 {
		return i == n
	}
	if i >= n {
		return false
	}
	switch top := stack[len(stack)-1]; b[i] {
	case ',':
		i++
		if top == '{' {
			goto key
		}
		goto value
	case top + 2:
		stack = stack[:len(stack)-1]
		i++
		goto after
	default:
		return false
	}
key:
	i = skipSpace(b, i)
	if i >= n || b[i] != '"' {
		return false
	}
	if i = scanString(b, i); i < 0 {
		return false
	}
	i = skipSpace(b, i)
	if i >= n || b[i] != ':' {
		return false
	}
	i++
	goto value
}

func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// scanString returns the index just past the string starting at b[i]
// (a '"'), or -1.
func scanString(b []byte, i int) int {
	i++
	for {
		for i < len(b) && !jsonStringStop[b[i]] {
			i++
		}
		if i >= len(b) {
			return -1
		}
		switch b[i] {
		case '"':
			return i + 1
		case '\\':
			if i+1 >= len(b) {
				return -1
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					return -1
				}
				i += 6
			default:
				return -1
			}
		default: // a control character
			return -1
		}
	}
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// scanNumber returns the index just past the number starting at b[i], or
// -1: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func scanNumber(b []byte, i int) int {
	if b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return -1
	case b[i] == '0':
		i++
	case b[i] >= '1' && b[i] <= '9':
		i = skipDigits(b, i+1)
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		j := skipDigits(b, i+1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := skipDigits(b, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

func skipDigits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

// scanLiteral returns the index just past lit at b[i], or -1.
func scanLiteral(b []byte, i int, lit string) int {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}
