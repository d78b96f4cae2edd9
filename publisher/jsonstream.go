package publisher

// jsonStream tells whether a line fed to it in pieces is JSON, with
// exactly validJSON's (and json.Valid's) answer: a line too long to hold
// whole is routed by the same rule as any other. It is a byte-at-a-time
// state machine, as encoding/json's scanner is, with a fast path through
// the bytes of a string, where a huge line spends its length. Its memory
// is the stack of open containers, at most maxJSONDepth bytes.
type jsonStream struct {
	state   jsState
	stack   []byte // '{' key expected, ':' value of an object, '[' value of an array
	lit     string // the rest of a literal being read (true, false, null)
	hex     int    // hex digits still due in a \u escape
	invalid bool
}

type jsState uint8

const (
	jsBeginValue        jsState = iota // a value, after optional space
	jsBeginValueOrClose                // after '[': a value or ']'
	jsBeginKeyOrClose                  // after '{': a key or '}'
	jsBeginKey                         // after ',' in an object: a key
	jsString                           // inside a string
	jsEscape                           // after '\' in a string
	jsHex                              // inside a \u escape
	jsNeg                              // after '-'
	jsInt                              // in an integer's digits after a leading 1-9
	jsZero                             // after a leading 0 (or the integer's digits)
	jsDot                              // after '.'
	jsFrac                             // in the fraction's digits
	jsExp                              // after 'e' or 'E'
	jsExpSign                          // after the exponent's sign
	jsExpDigits                        // in the exponent's digits
	jsLiteral                          // inside true, false or null
	jsEndValue                         // after a value
	jsEndTop                           // after the top value: only space
)

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// write feeds the next bytes of the line; it reports whether the line can
// still be JSON, so a caller may stop feeding at the first false.
func (s *jsonStream) write(p []byte) bool {
	for i := 0; i < len(p) && !s.invalid; i++ {
		if s.state == jsString {
			// The bulk of a long line: skip to the next byte that matters.
			for i < len(p) && !jsonStringStop[p[i]] {
				i++
			}
			if i == len(p) {
				break
			}
		}
		s.step(p[i])
	}
	return !s.invalid
}

// valid reports whether the bytes written are exactly one JSON value with
// optional space around it.
func (s *jsonStream) valid() bool {
	if s.invalid {
		return false
	}
	end := *s
	end.stack = nil // step on a copy never pushes on a trailing space
	end.step(' ')
	return !end.invalid && end.state == jsEndTop && len(s.stack) == 0
}

func (s *jsonStream) fail() { s.invalid = true }

// step consumes one byte.
func (s *jsonStream) step(c byte) {
	switch s.state {
	case jsBeginValueOrClose:
		if isSpace(c) {
			return
		}
		if c == ']' {
			s.close('[')
			return
		}
		s.beginValue(c)
	case jsBeginValue:
		if !isSpace(c) {
			s.beginValue(c)
		}
	case jsBeginKeyOrClose:
		switch {
		case isSpace(c):
		case c == '}':
			s.close('{')
		case c == '"':
			s.state = jsString
		default:
			s.fail()
		}
	case jsBeginKey:
		switch {
		case isSpace(c):
		case c == '"':
			s.state = jsString
		default:
			s.fail()
		}
	case jsString:
		switch {
		case c == '"':
			s.state = jsEndValue
		case c == '\\':
			s.state = jsEscape
		case c < 0x20:
			s.fail()
		}
	case jsEscape:
		switch c {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			s.state = jsString
		case 'u':
			s.state, s.hex = jsHex, 4
		default:
			s.fail()
		}
	case jsHex:
		if !isHex(c) {
			s.fail()
			return
		}
		if s.hex--; s.hex == 0 {
			s.state = jsString
		}
	case jsNeg:
		switch {
		case c == '0':
			s.state = jsZero
		case c >= '1' && c <= '9':
			s.state = jsInt
		default:
			s.fail()
		}
	case jsInt:
		if c >= '0' && c <= '9' {
			return
		}
		s.state = jsZero
		s.step(c)
	case jsZero:
		switch c {
		case '.':
			s.state = jsDot
		case 'e', 'E':
			s.state = jsExp
		default:
			s.state = jsEndValue
			s.step(c)
		}
	case jsDot:
		if c >= '0' && c <= '9' {
			s.state = jsFrac
			return
		}
		s.fail()
	case jsFrac:
		switch {
		case c >= '0' && c <= '9':
		case c == 'e' || c == 'E':
			s.state = jsExp
		default:
			s.state = jsEndValue
			s.step(c)
		}
	case jsExp:
		switch {
		case c == '+' || c == '-':
			s.state = jsExpSign
		case c >= '0' && c <= '9':
			s.state = jsExpDigits
		default:
			s.fail()
		}
	case jsExpSign:
		if c >= '0' && c <= '9' {
			s.state = jsExpDigits
			return
		}
		s.fail()
	case jsExpDigits:
		if c >= '0' && c <= '9' {
			return
		}
		s.state = jsEndValue
		s.step(c)
	case jsLiteral:
		if c != s.lit[0] {
			s.fail()
			return
		}
		if s.lit = s.lit[1:]; s.lit == "" {
			s.state = jsEndValue
		}
	case jsEndValue:
		s.endValue(c)
	case jsEndTop:
		if !isSpace(c) {
			s.fail()
		}
	}
}

// beginValue starts a value at c, which is not space.
func (s *jsonStream) beginValue(c byte) {
	switch {
	case c == '{' || c == '[':
		if len(s.stack) == maxJSONDepth {
			s.fail()
			return
		}
		s.stack = append(s.stack, c)
		s.state = jsBeginKeyOrClose
		if c == '[' {
			s.state = jsBeginValueOrClose
		}
	case c == '"':
		s.state = jsString
	case c == '-':
		s.state = jsNeg
	case c == '0':
		s.state = jsZero
	case c >= '1' && c <= '9':
		s.state = jsInt
	case c == 't':
		s.state, s.lit = jsLiteral, "rue"
	case c == 'f':
		s.state, s.lit = jsLiteral, "alse"
	case c == 'n':
		s.state, s.lit = jsLiteral, "ull"
	default:
		s.fail()
	}
}

// endValue goes on after a value (or an object's key) at c.
func (s *jsonStream) endValue(c byte) {
	if len(s.stack) == 0 {
		s.state = jsEndTop
		s.step(c)
		return
	}
	if isSpace(c) {
		return
	}
	top := &s.stack[len(s.stack)-1]
	switch {
	case *top == '{' && c == ':': // the key is read
		*top, s.state = ':', jsBeginValue
	case *top == ':' && c == ',':
		*top, s.state = '{', jsBeginKey
	case *top == ':' && c == '}':
		s.close(':')
	case *top == '[' && c == ',':
		s.state = jsBeginValue
	case *top == '[' && c == ']':
		s.close('[')
	default:
		s.fail()
	}
}

// close ends the innermost container, whose stack entry is top.
func (s *jsonStream) close(top byte) {
	if s.stack[len(s.stack)-1] != top {
		s.fail()
		return
	}
	s.stack = s.stack[:len(s.stack)-1]
	s.state = jsEndValue
}
