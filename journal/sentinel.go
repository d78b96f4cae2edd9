package journal

import (
	"bytes"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"strconv"
)

// Sentinel reasons: why the agent ended.
const (
	ReasonExit    = "exit"    // the agent exited by itself
	ReasonSignal  = "signal"  // a signal killed it
	ReasonTimeout = "timeout" // the runner ended it at the deadline
	ReasonCancel  = "cancel"  // the runner ended it on a cancel request
	ReasonError   = "error"   // the sandbox failed to start or run it
	// ReasonOutputLimit: the agent printed more than its run's output
	// limit, and the runner killed it.
	ReasonOutputLimit = "output-limit"
)

// Sentinel is the journal's last line. Its nonce is random per run and never
// shown to the agent, so a line the agent forges is an ordinary line.
type Sentinel struct {
	Exit   int    `json:"__exit"`
	Nonce  string `json:"__nonce"`
	Reason string `json:"reason"`
	Signal string `json:"signal,omitempty"`
	Detail string `json:"detail,omitempty"`
	// CPUUserUsec, CPUSystemUsec and MaxRSS (bytes) are the agent's
	// resource use as the runner's wait for it reported: absent when the
	// agent never ran, and in journals of runners that did not measure.
	CPUUserUsec   int64 `json:"cpuUserUsec,omitempty"`
	CPUSystemUsec int64 `json:"cpuSystemUsec,omitempty"`
	MaxRSS        int64 `json:"maxRss,omitempty"`
}

// Line encodes s as one journal line, newline included.
func (s Sentinel) Line() []byte {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err) // plain strings and ints always encode
	}
	return append(b, '\n')
}

// maxNonce bounds a nonce's length; NewNonce makes 32 bytes.
const maxNonce = 256

// NewNonce returns a fresh random nonce for a run's sentinel: 128 bits, hex.
func NewNonce() string {
	var b [16]byte
	random(b[:])
	return hex.EncodeToString(b[:])
}

// validNonce reports whether nonce can end a journal: 1 to 256 bytes of
// letters, digits and "-_.~+/=" (hex, base64 and base64url all fit). These
// are the bytes json.Marshal writes verbatim, so the sentinel line always
// holds the nonce as is, which is what lets a reader skip every other line
// with one substring search.
func validNonce(nonce string) bool {
	if nonce == "" || len(nonce) > maxNonce {
		return false
	}
	for i := 0; i < len(nonce); i++ {
		c := nonce[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '-', c == '_', c == '.', c == '~', c == '+', c == '/', c == '=':
		default:
			return false
		}
	}
	return true
}

// ParseSentinel reports whether line (a journal line without its '\n'; a
// trailing '\r' is tolerated) is the sentinel of the run whose nonce is
// nonce, and decodes it. It fails closed: the line must be exactly one JSON
// object whose keys are "__exit" (an integer written as one: not 1.5, 1.0,
// 1e2 or "0") that fits an int, "__nonce" (a string equal to nonce), and
// optionally "reason", "signal" and "detail" (strings) and "cpuUserUsec",
// "cpuSystemUsec" and "maxRss" (integers, not negative), each at most
// once, and nothing else; and the nonce must appear in the line verbatim, as
// Sentinel.Line writes it. Any other line, a sentinel with another nonce
// included, is an ordinary line. A nonce that is empty or not 1 to 256
// bytes of letters, digits and "-_.~+/=" matches no line.
func ParseSentinel(line []byte, nonce string) (Sentinel, bool) {
	if !validNonce(nonce) {
		return Sentinel{}, false
	}
	return parseSentinel(line, []byte(nonce))
}

// SentinelMatcher is ParseSentinel for one nonce, checked once: what a
// reader of a whole journal calls on each of its lines.
type SentinelMatcher struct{ nonce []byte }

// NewSentinelMatcher checks nonce as ParseSentinel does; ok is false for a
// nonce that would match no line.
func NewSentinelMatcher(nonce string) (m SentinelMatcher, ok bool) {
	if !validNonce(nonce) {
		return SentinelMatcher{}, false
	}
	return SentinelMatcher{nonce: []byte(nonce)}, true
}

// Match is ParseSentinel(line, nonce) for the matcher's nonce.
func (m SentinelMatcher) Match(line []byte) (Sentinel, bool) { return parseSentinel(line, m.nonce) }

// parseSentinel is ParseSentinel for a nonce already known to be valid.
func parseSentinel(line, nonce []byte) (Sentinel, bool) {
	// Every journal line comes through here; only the real sentinel holds
	// the nonce, so this one search is all most lines cost.
	if !bytes.Contains(line, nonce) {
		return Sentinel{}, false
	}
	if !json.Valid(line) {
		return Sentinel{}, false
	}
	// A token walk rather than Unmarshal: Unmarshal lets a repeated key win
	// silently and ignores unknown ones, and both must fail here.
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return Sentinel{}, false
	}
	const (
		seenExit = 1 << iota
		seenNonce
		seenReason
		seenSignal
		seenDetail
		seenCPUUser
		seenCPUSystem
		seenMaxRSS
	)
	var (
		s    Sentinel
		seen int
	)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return Sentinel{}, false
		}
		key, _ := tok.(string)
		if tok, err = dec.Token(); err != nil {
			return Sentinel{}, false
		}
		var bit int
		switch key {
		case "__exit":
			bit = seenExit
			num, ok := tok.(json.Number)
			if !ok {
				return Sentinel{}, false
			}
			// Atoi takes only an optional '-' and digits, the JSON integers
			// that fit an int.
			n, err := strconv.Atoi(string(num))
			if err != nil {
				return Sentinel{}, false
			}
			s.Exit = n
		case "cpuUserUsec", "cpuSystemUsec", "maxRss":
			num, ok := tok.(json.Number)
			if !ok {
				return Sentinel{}, false
			}
			n, err := strconv.ParseInt(string(num), 10, 64)
			if err != nil || n < 0 {
				return Sentinel{}, false
			}
			switch key {
			case "cpuUserUsec":
				bit, s.CPUUserUsec = seenCPUUser, n
			case "cpuSystemUsec":
				bit, s.CPUSystemUsec = seenCPUSystem, n
			case "maxRss":
				bit, s.MaxRSS = seenMaxRSS, n
			}
		case "__nonce", "reason", "signal", "detail":
			str, ok := tok.(string)
			if !ok {
				return Sentinel{}, false
			}
			switch key {
			case "__nonce":
				bit = seenNonce
				if subtle.ConstantTimeCompare([]byte(str), nonce) != 1 {
					return Sentinel{}, false
				}
				s.Nonce = str
			case "reason":
				bit, s.Reason = seenReason, str
			case "signal":
				bit, s.Signal = seenSignal, str
			case "detail":
				bit, s.Detail = seenDetail, str
			}
		default:
			return Sentinel{}, false
		}
		if seen&bit != 0 {
			return Sentinel{}, false
		}
		seen |= bit
	}
	// json.Valid vouched for the rest: the closing '}' and only whitespace.
	if seen&(seenExit|seenNonce) != seenExit|seenNonce {
		return Sentinel{}, false
	}
	return s, true
}
