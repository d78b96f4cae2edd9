package protocol_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/batonhq/baton/policy"
	"github.com/batonhq/baton/protocol"
)

// kv is an ordered list of key, value pairs, so a case can repeat a key.
type kv []any

// jsonOf encodes pairs as a JSON object in the given order.
func jsonOf(t testing.TB, pairs kv) []byte {
	t.Helper()
	var b bytes.Buffer
	b.WriteByte('{')
	for i := 0; i < len(pairs); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(pairs[i])
		if err != nil {
			t.Fatal(err)
		}
		v, err := json.Marshal(pairs[i+1])
		if err != nil {
			t.Fatal(err)
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// msgpackOf encodes pairs as a msgpack map in the given order.
func msgpackOf(t testing.TB, pairs kv) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := msgpack.NewEncoder(&b)
	if err := enc.EncodeMapLen(len(pairs) / 2); err != nil {
		t.Fatal(err)
	}
	for _, v := range pairs {
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes()
}

// rawJSON is a value jsonOf writes verbatim (numbers out of float range).
type rawJSON string

func (r rawJSON) MarshalJSON() ([]byte, error) { return []byte(r), nil }

var (
	sentinels = []error{
		protocol.ErrMalformedJob, protocol.ErrUnknownField, protocol.ErrBadRunID,
		protocol.ErrOversize, protocol.ErrInvalidJob,
	}
	reasons = map[error]protocol.Reason{
		protocol.ErrMalformedJob: protocol.ReasonMalformed,
		protocol.ErrUnknownField: protocol.ReasonUnknownField,
		protocol.ErrBadRunID:     protocol.ReasonBadRunID,
		protocol.ErrOversize:     protocol.ReasonOversize,
		protocol.ErrInvalidJob:   protocol.ReasonInvalid,
	}
)

// checkRejection asserts err wraps want, maps to its reason, starts with the
// sentinel's text, contains msg and fits on one header line.
func checkRejection(t *testing.T, err, want error, msg string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted; want %v containing %q", want, msg)
	}
	if !errors.Is(err, want) {
		t.Fatalf("error %q does not wrap %q", err, want)
	}
	if got := protocol.ReasonOf(err); got != reasons[want] {
		t.Errorf("ReasonOf(%q) = %q, want %q", err, got, reasons[want])
	}
	if !strings.HasPrefix(err.Error(), want.Error()+": ") {
		t.Errorf("error %q does not start with %q", err, want.Error()+": ")
	}
	if !strings.Contains(err.Error(), msg) {
		t.Errorf("error %q does not contain %q", err, msg)
	}
	if strings.ContainsAny(err.Error(), "\r\n") || len(err.Error()) > 400 {
		t.Errorf("error %q cannot travel in a header", err)
	}
}

func ok(extra ...any) kv { return append(kv{"runId", "r1", "profile", "demo"}, extra...) }

func strs(n int, s string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func manyKeys(n int, prefix, value string) map[string]string {
	m := map[string]string{}
	for i := range n {
		m[fmt.Sprintf("%s%d", prefix, i)] = value
	}
	return m
}

// deepFiles is n paths of 1,024 bytes, depth levels deep.
func deepFiles(n, depth int) map[string]string {
	m := map[string]string{}
	for i := range n {
		p := fmt.Sprintf("%02d/%s", i, strings.Repeat("a/", depth-2))
		m[p+strings.Repeat("f", 1024-len(p))] = "x"
	}
	return m
}

// TestDecodeJobRejects runs every case in both encodings.
func TestDecodeJobRejects(t *testing.T) {
	big := protocol.Limits{MaxBytes: 8 << 20}
	cases := []struct {
		name  string
		pairs kv
		lim   protocol.Limits
		want  error
		msg   string
	}{
		{"runId missing", kv{"profile", "demo"}, big, protocol.ErrBadRunID, "runId is missing"},
		{"runId empty", kv{"runId", "", "profile", "demo"}, big, protocol.ErrBadRunID, "runId is missing"},
		{"runId null", kv{"runId", nil, "profile", "demo"}, big, protocol.ErrBadRunID, "runId is missing"},
		{"runId dot", kv{"runId", "a.b", "profile", "demo"}, big, protocol.ErrBadRunID, `runId "a.b" must match [A-Za-z0-9_-]{1,128}`},
		{"runId wildcard", kv{"runId", "a*", "profile", "demo"}, big, protocol.ErrBadRunID, `runId "a*"`},
		{"runId too long", kv{"runId", strings.Repeat("a", 129), "profile", "demo"}, big, protocol.ErrBadRunID, "must match"},
		{"runId NUL", kv{"runId", "a\x00b", "profile", "demo"}, big, protocol.ErrBadRunID, `runId "a\x00b"`},
		{"runId number", kv{"runId", 7, "profile", "demo"}, big, protocol.ErrMalformedJob, `field "runId" must be a string, not a number`},
		{"runId array", kv{"runId", []string{"a"}, "profile", "demo"}, big, protocol.ErrMalformedJob, `field "runId" must be a string, not an array`},
		{"runId twice", kv{"runId", "a", "runId", "b", "profile", "demo"}, big, protocol.ErrMalformedJob, `field "runId" appears twice`},
		{"profile missing", kv{"runId", "r1"}, big, protocol.ErrInvalidJob, `field "profile" is missing`},
		{"profile NUL", kv{"runId", "r1", "profile", "de\x00mo"}, big, protocol.ErrInvalidJob, `profile "de\x00mo" must match`},
		{"profile space", kv{"runId", "r1", "profile", "a b"}, big, protocol.ErrInvalidJob, `profile "a b" must match`},
		{"profile bool", kv{"runId", "r1", "profile", true}, big, protocol.ErrMalformedJob, `field "profile" must be a string, not a boolean`},
		{"unknown field", ok("prompt", "hi"), big, protocol.ErrUnknownField, `field "prompt" is not part of a job`},
		{"disk top-level", ok("disk", 1024), big, protocol.ErrUnknownField, `field "disk" is not part of a job`},
		{"disk negative", ok("limits", map[string]string{"disk": "-1"}), big, protocol.ErrInvalidJob, `limits["disk"] "-1" is not a size`},
		{"disk zero", ok("limits", map[string]string{"disk": "0"}), big, protocol.ErrInvalidJob, `limits["disk"] "0" is not a size`},
		{"disk number", ok("limits", map[string]any{"disk": 1024}), big, protocol.ErrMalformedJob, `disk`},
		{"session dot", ok("session", "a.b"), big, protocol.ErrInvalidJob, `session "a.b" must match [A-Za-z0-9_-]{1,128}`},
		{"session too long", ok("session", strings.Repeat("s", 129)), big, protocol.ErrInvalidJob, `must match`},
		{"session number", ok("session", 3), big, protocol.ErrMalformedJob, `field "session" must be a string, not a number`},
		{"session with retries", ok("session", "s1", "retries", 2), big, protocol.ErrInvalidJob, `a session's run is not retried`},
		{"retries negative", ok("retries", -1), big, protocol.ErrInvalidJob, `field "retries" is -1; it must be between 0 and 10`},
		{"retries too many", ok("retries", 11), big, protocol.ErrInvalidJob, `field "retries" is 11`},
		{"retries string", ok("retries", "2"), big, protocol.ErrMalformedJob, `field "retries" must be a whole number`},
		{"retries fraction", ok("retries", 1.5), big, protocol.ErrMalformedJob, `field "retries" must be a whole number`},
		{"key with a dot", ok("concurrencyKey", "a.b"), big, protocol.ErrInvalidJob, `concurrencyKey "a.b" must match [A-Za-z0-9_-]{1,64}`},
		{"key too long", ok("concurrencyKey", strings.Repeat("k", 65)), big, protocol.ErrInvalidJob, `must match [A-Za-z0-9_-]{1,64}`},
		{"key not a string", ok("concurrencyKey", 7), big, protocol.ErrMalformedJob, `field "concurrencyKey"`},
		{"priority too high", ok("priority", 6), big, protocol.ErrInvalidJob, `field "priority" is 6; it must be between 1 and 5`},
		{"priority negative", ok("priority", -1), big, protocol.ErrInvalidJob, `field "priority" is -1`},
		{"priority string", ok("priority", "5"), big, protocol.ErrMalformedJob, `field "priority" must be a whole number`},
		{"retries with a long runId", kv{"runId", strings.Repeat("a", 121), "profile", "demo", "retries", 1}, big, protocol.ErrBadRunID, "with retries it may have at most 120"},
		{"limits unknown", ok("limits", map[string]string{"memory": "1GiB"}), big, protocol.ErrInvalidJob, `limits key "memory" is not a limit a job may set (limits: disk, output, outputs)`},
		{"limits bad size", ok("limits", map[string]string{"output": "1GB"}), big, protocol.ErrInvalidJob, `limits["output"] "1GB" is not a size like "1MiB" above zero`},
		{"limits zero", ok("limits", map[string]string{"output": "0"}), big, protocol.ErrInvalidJob, `limits["output"] "0" is not a size`},
		{"limits number", ok("limits", map[string]int{"output": 5}), big, protocol.ErrMalformedJob, `field "limits" must be`},
		{"limits list", ok("limits", []string{"output"}), big, protocol.ErrMalformedJob, `field "limits" must be`},
		{"field name case", kv{"runID", "r1", "profile", "demo"}, big, protocol.ErrUnknownField, `field "runID"`},
		{"input number", ok("input", 3), big, protocol.ErrMalformedJob, `field "input" must be a string, not a number`},
		{"input too big", ok("input", strings.Repeat("x", protocol.DefaultMaxInput+1)), big, protocol.ErrOversize, `field "input" is 524289 bytes, limit 524288`},
		{"input over custom limit", ok("input", "hello"), protocol.Limits{MaxInput: 4}, protocol.ErrOversize, `field "input" is 5 bytes, limit 4`},
		{"args number", ok("args", 1), big, protocol.ErrMalformedJob, `field "args" must be an array of strings, not a number`},
		{"args string", ok("args", "-v"), big, protocol.ErrMalformedJob, `field "args" must be an array of strings, not a string`},
		{"args element", ok("args", []any{"a", 2}), big, protocol.ErrMalformedJob, `field "args" must be an array of strings; element 1 is a number`},
		{"args null element", ok("args", []any{nil}), big, protocol.ErrMalformedJob, `element 0 is`},
		{"args NUL", ok("args", []string{"ok", "a\x00"}), big, protocol.ErrInvalidJob, `args[1] must not contain NUL bytes`},
		{"args too many", ok("args", strs(257, "a")), big, protocol.ErrOversize, `field "args" has 257 entries, limit 256`},
		{"arg too long", ok("args", []string{strings.Repeat("a", 8<<10+1)}), big, protocol.ErrOversize, `args[0] is 8193 bytes, limit 8192`},
		{"env array", ok("env", []string{"A=1"}), big, protocol.ErrMalformedJob, `field "env" must be a`},
		{"env value number", ok("env", map[string]any{"A": 1}), big, protocol.ErrMalformedJob, `the value of "A" is a number`},
		{"env key digit", ok("env", map[string]string{"1A": "x"}), big, protocol.ErrInvalidJob, `env key "1A" must match [A-Za-z_][A-Za-z0-9_]{0,127}`},
		{"env key dash", ok("env", map[string]string{"A-B": "x"}), big, protocol.ErrInvalidJob, `env key "A-B"`},
		{"env key empty", ok("env", map[string]string{"": "x"}), big, protocol.ErrInvalidJob, `env key ""`},
		{"env key NUL", ok("env", map[string]string{"A\x00": "x"}), big, protocol.ErrInvalidJob, `env key "A\x00"`},
		{"env value NUL", ok("env", map[string]string{"A": "x\x00y"}), big, protocol.ErrInvalidJob, `env["A"] must not contain NUL bytes`},
		{"env value too long", ok("env", map[string]string{"A": strings.Repeat("v", 32<<10+1)}), big, protocol.ErrOversize, `env["A"] is 32769 bytes, limit 32768`},
		{"env too many", ok("env", manyKeys(129, "K", "v")), big, protocol.ErrOversize, `field "env" has 129 entries, limit 128`},
		{"env over custom limit", ok("env", manyKeys(3, "K", "v")), protocol.Limits{MaxEnv: 2}, protocol.ErrOversize, `field "env" has 3 entries, limit 2`},
		{"timeout word", ok("timeout", "soon"), big, protocol.ErrInvalidJob, `field "timeout": "soon" is not a duration`},
		{"timeout no unit", ok("timeout", "90"), big, protocol.ErrInvalidJob, `"90" is not a duration`},
		{"timeout negative string", ok("timeout", "-5s"), big, protocol.ErrInvalidJob, `field "timeout" must not be negative`},
		{"timeout negative number", ok("timeout", -5), big, protocol.ErrInvalidJob, `field "timeout": duration must not be negative`},
		{"timeout huge", ok("timeout", 1e300), big, protocol.ErrInvalidJob, `field "timeout": duration of 1e+300 seconds is too long`},
		{"timeout bool", ok("timeout", true), big, protocol.ErrMalformedJob, `field "timeout" must be a duration string like "90s" or a number of seconds, not a boolean`},
		{"timeout object", ok("timeout", map[string]int{"s": 1}), big, protocol.ErrMalformedJob, `field "timeout" must be a duration`},
		{"files array", ok("files", []string{"a"}), big, protocol.ErrMalformedJob, `field "files" must be a`},
		{"files absolute", ok("files", map[string]string{"/etc/passwd": "x"}), big, protocol.ErrInvalidJob, `files["/etc/passwd"]: path must be relative to the workspace`},
		{"files dotdot", ok("files", map[string]string{"../x": "x"}), big, protocol.ErrInvalidJob, `files["../x"]: path must not contain ".."`},
		{"files inner dotdot", ok("files", map[string]string{"a/../../b": "x"}), big, protocol.ErrInvalidJob, `must not contain ".."`},
		{"files empty path", ok("files", map[string]string{"": "x"}), big, protocol.ErrInvalidJob, `files[""]: path must not be empty`},
		{"files dir", ok("files", map[string]string{"a/": "x"}), big, protocol.ErrInvalidJob, `path must name a file, not end in /`},
		{"files dot", ok("files", map[string]string{".": "x"}), big, protocol.ErrInvalidJob, `files["."]: path must name a file`},
		{"files unclean", ok("files", map[string]string{"./a": "x"}), big, protocol.ErrInvalidJob, `path must be clean (did you mean "a"?)`},
		{"files double slash", ok("files", map[string]string{"a//b": "x"}), big, protocol.ErrInvalidJob, `did you mean "a/b"?`},
		{"files NUL", ok("files", map[string]string{"a\x00b": "x"}), big, protocol.ErrInvalidJob, `path must not contain NUL bytes`},
		{"files long component", ok("files", map[string]string{"d/" + strings.Repeat("n", 256): "x"}), big, protocol.ErrInvalidJob, `has a component of 256 bytes, limit 255`},
		{"files 257 levels", ok("files", map[string]string{strings.TrimSuffix(strings.Repeat("a/", 257), "/"): "x"}), big, protocol.ErrInvalidJob, `path is 257 levels deep, limit 256`},
		// F9's variant: 64 paths of 1,024 bytes, 510 levels, within every other bound.
		{"files 510 levels", ok("files", deepFiles(64, 510)), big, protocol.ErrInvalidJob, `path is 510 levels deep, limit 256`},
		{"files file and dir", ok("files", map[string]string{"a": "x", "a/b": "y"}), big, protocol.ErrInvalidJob, `files["a/b"]: "a" is a file, so it cannot also be a directory`},
		{"files content number", ok("files", map[string]any{"a": 1}), big, protocol.ErrMalformedJob, `the value of "a" is a number`},
		{"files too many", ok("files", manyKeys(65, "f", "")), big, protocol.ErrOversize, `field "files" has 65 entries, limit 64`},
		{"file too big", ok("files", map[string]string{"a": strings.Repeat("x", 256<<10+1)}), big, protocol.ErrOversize, `files["a"] is 262145 bytes, limit 262144`},
		{"files too big together", ok("files", manyKeys(5, "f", strings.Repeat("x", 256<<10))), big, protocol.ErrOversize, `field "files" holds 1310720 bytes in all, limit 1048576`},
		{"labels string", ok("labels", "x"), big, protocol.ErrMalformedJob, `field "labels" must be a`},
		{"labels value bool", ok("labels", map[string]any{"a": false}), big, protocol.ErrMalformedJob, `the value of "a" is a boolean`},
		{"labels empty key", ok("labels", map[string]string{"": "x"}), big, protocol.ErrInvalidJob, `labels key must not be empty`},
		{"labels long key", ok("labels", map[string]string{strings.Repeat("k", 65): "x"}), big, protocol.ErrOversize, `is 65 bytes, limit 64`},
		{"labels long value", ok("labels", map[string]string{"k": strings.Repeat("v", 257)}), big, protocol.ErrOversize, `labels["k"] is 257 bytes, limit 256`},
		{"labels too many", ok("labels", manyKeys(33, "l", "v")), big, protocol.ErrOversize, `field "labels" has 33 entries, limit 32`},
		{"labels NUL", ok("labels", map[string]string{"k": "\x00"}), big, protocol.ErrInvalidJob, `labels["k"] must not contain NUL bytes`},
		{"labels reserved attempt", ok("labels", map[string]string{"baton.attempt": "2"}), big, protocol.ErrInvalidJob, `labels key "baton.attempt": the prefix "baton." is reserved for baton`},
		{"labels reserved retryOf", ok("labels", map[string]string{"team": "x", "baton.retryOf": "r0"}), big, protocol.ErrInvalidJob, `labels key "baton.retryOf": the prefix "baton." is reserved`},
		{"labels reserved any case", ok("labels", map[string]string{"Baton.X": "1"}), big, protocol.ErrInvalidJob, `the prefix "baton." is reserved`},
		{"policy list", ok("policy", []string{"Read"}), big, protocol.ErrMalformedJob, `field "policy" must be an object like`},
		{"policy bad rule", ok("policy", map[string][]string{"deny": {"Bash(curl *"}}), big, protocol.ErrInvalidJob, `policy: deny[0] "Bash(curl *": the pattern must end with )`},
		{"policy bad default", ok("policy", map[string]string{"default": "never"}), big, protocol.ErrInvalidJob, `policy: default "never" must be allow, ask or deny`},
		{"policy unknown key", ok("policy", map[string][]string{"commands": {"ls"}}), big, protocol.ErrUnknownField, `field "policy" has no key "commands"`},
		{"payload too big", ok("input", strings.Repeat("x", 600)), protocol.Limits{MaxBytes: 512}, protocol.ErrOversize, `payload is`},
	}
	if len(cases) < 30 {
		t.Fatalf("only %d cases", len(cases))
	}
	for _, tc := range cases {
		for _, enc := range []struct {
			name, ct string
			encode   func(testing.TB, kv) []byte
		}{
			{"json", "application/json", jsonOf},
			{"msgpack", "application/msgpack", msgpackOf},
		} {
			t.Run(enc.name+"/"+tc.name, func(t *testing.T) {
				data := enc.encode(t, tc.pairs)
				j, err := protocol.DecodeJob(data, enc.ct, tc.lim)
				if err == nil {
					t.Fatalf("accepted %+v", j)
				}
				checkRejection(t, err, tc.want, tc.msg)
			})
		}
	}
}

func TestDecodeJobRejectsJSONSyntax(t *testing.T) {
	cases := []struct {
		name, data string
		msg        string
	}{
		{"empty", "", "payload is empty"},
		{"blank", " \n\t", "payload is empty"},
		{"null", "null", "job must be a JSON object, not null"},
		{"array", `[{"runId":"r1"}]`, "job must be a JSON object, not an array"},
		{"string", `"r1"`, "job must be a JSON object, not a string"},
		{"number", `42`, "job must be a JSON object, not a number"},
		{"trailing object", `{"runId":"r1","profile":"demo"}{}`, "unexpected data after the job object"},
		{"trailing garbage", `{"runId":"r1","profile":"demo"} x`, "unexpected data after the job object"},
		{"truncated", `{"runId":"r1",`, "JSON ends before the job object is complete"},
		{"missing colon", `{"runId" "r1"}`, "invalid JSON at byte"},
		{"trailing comma", `{"runId":"r1","profile":"demo",}`, "invalid JSON at byte"},
		{"single quotes", `{'runId':'r1'}`, "invalid JSON at byte"},
		{"invalid UTF-8", "{\"runId\":\"r1\",\"profile\":\"demo\",\"input\":\"\xff\"}", "payload is not valid UTF-8 JSON"},
		{"duplicate env key", `{"runId":"r1","profile":"demo","env":{"A":"1","A":"2"}}`, `field "env" has the key "A" twice`},
		{"duplicate labels key", `{"runId":"r1","profile":"demo","labels":{"k":"1","k":"1"}}`, `field "labels" has the key "k" twice`},
		{"timeout out of range", `{"runId":"r1","profile":"demo","timeout":1e400}`, `seconds is out of range`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := protocol.DecodeJob([]byte(tc.data), "application/json; charset=utf-8", protocol.Limits{})
			want := protocol.ErrMalformedJob
			if errors.Is(err, protocol.ErrInvalidJob) {
				want = protocol.ErrInvalidJob
			}
			checkRejection(t, err, want, tc.msg)
		})
	}
}

func TestDecodeJobRejectsMsgpackEncoding(t *testing.T) {
	enc := func(f func(*msgpack.Encoder) error) []byte {
		var b bytes.Buffer
		if err := f(msgpack.NewEncoder(&b)); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	valid := msgpackOf(t, ok())
	cases := []struct {
		name string
		data []byte
		want error
		msg  string
	}{
		{"empty", nil, protocol.ErrMalformedJob, "payload is empty"},
		{"nil", []byte{0xc0}, protocol.ErrMalformedJob, "job must be a msgpack map, not nil"},
		{"array", enc(func(e *msgpack.Encoder) error { return e.Encode([]string{"r1"}) }), protocol.ErrMalformedJob, "job must be a msgpack map, not an array"},
		{"string", enc(func(e *msgpack.Encoder) error { return e.EncodeString("r1") }), protocol.ErrMalformedJob, "not a string"},
		{"never-used code", []byte{0xc1}, protocol.ErrMalformedJob, "not an invalid value (code 0xc1)"},
		{"truncated", valid[:len(valid)-3], protocol.ErrMalformedJob, "msgpack ends before the job map is complete"},
		{"trailing", append(bytes.Clone(valid), 0xc0), protocol.ErrMalformedJob, "unexpected data after the job map: 1 bytes"},
		{"two jobs", append(bytes.Clone(valid), valid...), protocol.ErrMalformedJob, "unexpected data after the job map"},
		{"int key", enc(func(e *msgpack.Encoder) error {
			return e.Encode(map[int]string{1: "r1"})
		}), protocol.ErrMalformedJob, "job keys must be strings, found a number"},
		{"int env key", msgpackOf(t, ok("env", map[int]string{1: "x"})), protocol.ErrMalformedJob, `field "env" must be a map of strings; found a key that is a number`},
		{"ext timeout", msgpackOf(t, ok("timeout", time.Unix(5, 0))), protocol.ErrMalformedJob, `field "timeout" must be a duration string like "90s" or a number of seconds, not an extension value`},
		{"map claims more entries", []byte{0x8f, 0xa5, 'r', 'u', 'n', 'I', 'd', 0xa1, 'r'}, protocol.ErrMalformedJob, "msgpack ends before"},
		{"array claims 2^32-1 entries", []byte{0x83, 0xa5, 'r', 'u', 'n', 'I', 'd', 0xa1, 'r', 0xa7, 'p', 'r', 'o', 'f', 'i', 'l', 'e', 0xa1, 'p', 0xa4, 'a', 'r', 'g', 's', 0xdd, 0xff, 0xff, 0xff, 0xff, 0xa1, 'a'}, protocol.ErrMalformedJob, "msgpack ends before"},
		{"invalid UTF-8 input", msgpackOf(t, ok("input", "\xff\xfe")), protocol.ErrInvalidJob, `field "input" is not valid UTF-8`},
		{"invalid UTF-8 arg", msgpackOf(t, ok("args", []string{"\xff"})), protocol.ErrInvalidJob, `args[0] is not valid UTF-8`},
		{"invalid UTF-8 file", msgpackOf(t, ok("files", map[string]string{"a": "\xff"})), protocol.ErrInvalidJob, `files["a"] content is not valid UTF-8`},
		{"NaN timeout", msgpackOf(t, ok("timeout", nan())), protocol.ErrInvalidJob, `not NaN`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := protocol.DecodeJob(tc.data, "application/msgpack", protocol.Limits{})
			checkRejection(t, err, tc.want, tc.msg)
		})
	}
}

func nan() float64 { var z float64; return z / z }

func fullJob() protocol.Job {
	return protocol.Job{
		RunID:          "run_42-A",
		Profile:        "claude.code",
		Input:          "Fix the <bug> & tell me\nwhy. ünïcødé \x00 ok in input",
		Args:           []string{"--model", "opus", ""},
		Env:            map[string]string{"FOO": "bar", "_X1": ""},
		Timeout:        protocol.Duration(90 * time.Second),
		Files:          map[string]string{"README.md": "# hi\n", "src/a/b.go": "package b\n", "empty": ""},
		Labels:         map[string]string{"team": "infra", "ticket": "T-1"},
		Limits:         map[string]string{"disk": "1GiB", "output": "1MiB"},
		Workspace:      &protocol.WorkspaceRef{Object: "sha256-0123.tar.gz"},
		Policy:         &policy.Policy{Default: policy.Deny, Allow: []string{"Read"}, Deny: []string{"Bash(curl *)"}},
		ConcurrencyKey: "acme",
		Priority:       5,
	}
}

func TestJobRoundTrip(t *testing.T) {
	jobs := map[string]protocol.Job{
		"full":    fullJob(),
		"minimal": {RunID: "r", Profile: "demo"},
	}
	for name, j := range jobs {
		t.Run(name+"/json", func(t *testing.T) {
			b, err := protocol.EncodeJob(j)
			if err != nil {
				t.Fatal(err)
			}
			got, err := protocol.DecodeJob(b, "", protocol.Limits{})
			if err != nil {
				t.Fatalf("%s: %v", b, err)
			}
			if !reflect.DeepEqual(got, j) {
				t.Fatalf("round trip changed the job:\n got %+v\nwant %+v", got, j)
			}
			again, _ := protocol.EncodeJob(got)
			if !bytes.Equal(b, again) {
				t.Fatalf("encoding is not deterministic:\n%s\n%s", b, again)
			}
		})
		t.Run(name+"/msgpack", func(t *testing.T) {
			b, err := protocol.EncodeJobMsgpack(j)
			if err != nil {
				t.Fatal(err)
			}
			got, err := protocol.DecodeJob(b, "application/msgpack; charset=binary", protocol.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, j) {
				t.Fatalf("round trip changed the job:\n got %+v\nwant %+v", got, j)
			}
			again, _ := protocol.EncodeJobMsgpack(got)
			if !bytes.Equal(b, again) {
				t.Fatal("msgpack encoding is not deterministic")
			}
		})
	}
}

func TestEncodeJobKeepsPromptsReadable(t *testing.T) {
	b, err := protocol.EncodeJob(protocol.Job{RunID: "r", Profile: "p", Input: "a < b && c"})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"runId":"r","profile":"p","input":"a < b && c"}`; string(b) != want {
		t.Fatalf("got %s, want %s", b, want)
	}
}

func TestDecodeJobAccepts(t *testing.T) {
	cases := []struct {
		name, ct string
		data     []byte
		want     protocol.Job
	}{
		{"retries", "", []byte(`{"runId":"r","profile":"p","retries":2}`),
			protocol.Job{RunID: "r", Profile: "p", Retries: 2}},
		{"limits", "", []byte(`{"runId":"r","profile":"p","limits":{"output":"1MiB"}}`),
			protocol.Job{RunID: "r", Profile: "p", Limits: map[string]string{"output": "1MiB"}}},
		{"msgpack limits", "application/msgpack", msgpackOf(t, kv{"runId", "r", "profile", "p", "limits", map[string]string{"output": "4096"}}),
			protocol.Job{RunID: "r", Profile: "p", Limits: map[string]string{"output": "4096"}}},
		{"msgpack retries", "application/msgpack", msgpackOf(t, kv{"runId", "r", "profile", "p", "retries", uint8(3)}),
			protocol.Job{RunID: "r", Profile: "p", Retries: 3}},
		{"timeout in seconds", "", []byte(`{"runId":"r","profile":"p","timeout":90}`),
			protocol.Job{RunID: "r", Profile: "p", Timeout: protocol.Duration(90 * time.Second)}},
		{"fractional seconds", "", []byte(`{"runId":"r","profile":"p","timeout":1.5}`),
			protocol.Job{RunID: "r", Profile: "p", Timeout: protocol.Duration(1500 * time.Millisecond)}},
		{"nulls are absent", "application/json", []byte(`{"runId":"r","profile":"p","input":null,"args":null,"env":null,"timeout":null,"files":null,"labels":null}`),
			protocol.Job{RunID: "r", Profile: "p"}},
		{"empty collections", "", []byte(`{"runId":"r","profile":"p","args":[],"env":{},"files":{},"labels":{}}`),
			protocol.Job{RunID: "r", Profile: "p"}},
		{"whitespace around", "", []byte("\n {\"profile\":\"p\", \"runId\":\"r\"} \n"),
			protocol.Job{RunID: "r", Profile: "p"}},
		{"unknown content type is JSON", "text/plain", []byte(`{"runId":"r","profile":"p"}`),
			protocol.Job{RunID: "r", Profile: "p"}},
		{"unparseable content type is JSON", ";;;", []byte(`{"runId":"r","profile":"p"}`),
			protocol.Job{RunID: "r", Profile: "p"}},
		{"msgpack timeout in seconds", "APPLICATION/MSGPACK", msgpackOf(t, kv{"runId", "r", "profile", "p", "timeout", uint16(600)}),
			protocol.Job{RunID: "r", Profile: "p", Timeout: protocol.Duration(10 * time.Minute)}},
		{"msgpack float timeout", "application/x-msgpack", msgpackOf(t, kv{"runId", "r", "profile", "p", "timeout", float32(0.5)}),
			protocol.Job{RunID: "r", Profile: "p", Timeout: protocol.Duration(500 * time.Millisecond)}},
		{"msgpack nils are absent", "application/msgpack", msgpackOf(t, kv{"runId", "r", "profile", "p", "args", nil, "env", nil, "timeout", nil, "input", nil}),
			protocol.Job{RunID: "r", Profile: "p"}},
		{"msgpack bin strings", "application/msgpack", msgpackOf(t, kv{"runId", []byte("r"), "profile", "p", "args", []any{[]byte("x")}}),
			protocol.Job{RunID: "r", Profile: "p", Args: []string{"x"}}},
		{"files 256 levels", "", jsonOf(t, kv{"runId", "r", "profile", "p", "files", map[string]string{strings.TrimSuffix(strings.Repeat("a/", 256), "/"): "x"}}),
			protocol.Job{RunID: "r", Profile: "p", Files: map[string]string{strings.TrimSuffix(strings.Repeat("a/", 256), "/"): "x"}}},
		{"msgpack timeout string", "application/msgpack", msgpackOf(t, kv{"runId", "r", "profile", "p", "timeout", "1h"}),
			protocol.Job{RunID: "r", Profile: "p", Timeout: protocol.Duration(time.Hour)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := protocol.DecodeJob(tc.data, tc.ct, protocol.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestDecodeJobMsgpackIsNotJSON(t *testing.T) {
	// The same JSON bytes sent as msgpack must not decode as a job.
	b, _ := protocol.EncodeJob(protocol.Job{RunID: "r", Profile: "p"})
	_, err := protocol.DecodeJob(b, "application/msgpack", protocol.Limits{})
	checkRejection(t, err, protocol.ErrMalformedJob, "job must be a msgpack map")
}

func TestValidateProgrammaticJob(t *testing.T) {
	j := protocol.Job{RunID: "r", Profile: "p", Timeout: protocol.Duration(-time.Second)}
	checkRejection(t, j.Validate(protocol.Limits{}), protocol.ErrInvalidJob, `field "timeout" must not be negative, got -1s`)

	_, err := protocol.EncodeJob(protocol.Job{RunID: "a.b", Profile: "p"})
	checkRejection(t, err, protocol.ErrBadRunID, `runId "a.b"`)
	_, err = protocol.EncodeJobMsgpack(protocol.Job{RunID: "r"})
	checkRejection(t, err, protocol.ErrInvalidJob, `field "profile" is missing`)

	long := protocol.Job{RunID: "r", Profile: "p", Args: []string{strings.Repeat("é", 5000)}}
	err = long.Validate(protocol.Limits{})
	checkRejection(t, err, protocol.ErrOversize, "args[0] is 10000 bytes")
}

func TestErrorQuotesAreShort(t *testing.T) {
	id := strings.Repeat("é", 200) // invalid as a runId; must be cut on a rune boundary
	err := protocol.Job{RunID: id, Profile: "p"}.Validate(protocol.Limits{})
	checkRejection(t, err, protocol.ErrBadRunID, `…`)
	if strings.Contains(err.Error(), `\x`) {
		t.Fatalf("quote cut a rune in half: %q", err)
	}
}

func TestDurationNumbersDoNotWrap(t *testing.T) {
	for _, in := range []string{`1e300`, `9300000000`, `-1`} {
		var d protocol.Duration
		if err := json.Unmarshal([]byte(in), &d); err == nil {
			t.Errorf("Duration accepted %s as %v", in, time.Duration(d))
		}
	}
	var d protocol.Duration
	if err := json.Unmarshal([]byte(`9000000000`), &d); err != nil || time.Duration(d) != 9e9*time.Second {
		t.Errorf("9e9 seconds: %v, %v", time.Duration(d), err)
	}
}

// TestReservedLabelsFromWorkers: a retry a worker wrote keeps its baton.*
// labels; the same job from anyone else is rejected.
func TestReservedLabelsFromWorkers(t *testing.T) {
	b := []byte(`{"runId":"r-a2","profile":"p","labels":{"baton.attempt":"2","baton.retryOf":"r","team":"x"}}`)
	if _, err := protocol.DecodeJob(b, "", protocol.Limits{}); !errors.Is(err, protocol.ErrInvalidJob) {
		t.Fatalf("DecodeJob without ReservedLabels = %v, want ErrInvalidJob", err)
	}
	j, err := protocol.DecodeJob(b, "", protocol.Limits{ReservedLabels: true})
	if err != nil || j.Labels[protocol.LabelAttempt] != "2" || j.Labels[protocol.LabelRetryOf] != "r" {
		t.Fatalf("DecodeJob with ReservedLabels = %+v, %v", j.Labels, err)
	}
	if _, err := protocol.EncodeJob(j); !errors.Is(err, protocol.ErrInvalidJob) {
		t.Fatalf("EncodeJob = %v, want ErrInvalidJob", err)
	}
	if _, err := protocol.EncodeWorkerJob(j); err != nil {
		t.Fatalf("EncodeWorkerJob = %v", err)
	}
}
