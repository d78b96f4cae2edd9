package protocol

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"mime"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"

	"github.com/batonhq/baton/internal/fstree"
)

// Defaults of Limits, and the fixed bounds a job's parts never exceed.
const (
	DefaultMaxJobBytes = 1 << 20   // a whole encoded job
	DefaultMaxInput    = 512 << 10 // the input, in bytes
	DefaultMaxArgs     = 256
	DefaultMaxEnv      = 128
	DefaultMaxFiles    = 64
	DefaultMaxLabels   = 32

	MaxArgBytes        = 8 << 10   // one arg
	MaxEnvValueBytes   = 32 << 10  // one env value
	MaxFileBytes       = 256 << 10 // one file's content
	MaxFilesTotalBytes = 1 << 20   // all files' content together
	MaxFilePathBytes   = 1024      // one file path
	MaxPathComponent   = 255       // one component of a file path (NAME_MAX)
	// MaxFilePathDepth bounds a file path's components, as a workspace
	// archive's names are bounded.
	MaxFilePathDepth   = fstree.DefaultMaxDepth
	MaxLabelKeyBytes   = 64
	MaxLabelValueBytes = 256
)

// Limits bound what a job may carry; zero (or negative) fields take the
// defaults. MaxBytes is checked by DecodeJob before parsing; the others by
// Validate.
type Limits struct {
	MaxBytes  int // whole encoded job, default 1 MiB
	MaxInput  int // default 512 KiB
	MaxArgs   int // default 256 args, each ≤ 8 KiB
	MaxEnv    int // default 128 entries, keys [A-Za-z_][A-Za-z0-9_]{0,127}, values ≤ 32 KiB, no NUL anywhere
	MaxFiles  int // default 64 files, each ≤ 256 KiB, total ≤ 1 MiB
	MaxLabels int // default 32, keys ≤ 64, values ≤ 256, none starting with "baton."
	// ReservedLabels allows labels starting with "baton.": only for jobs a
	// worker wrote (a retry, on the retry subject).
	ReservedLabels bool
}

func (l Limits) withDefaults() Limits {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.MaxBytes, DefaultMaxJobBytes)
	def(&l.MaxInput, DefaultMaxInput)
	def(&l.MaxArgs, DefaultMaxArgs)
	def(&l.MaxEnv, DefaultMaxEnv)
	def(&l.MaxFiles, DefaultMaxFiles)
	def(&l.MaxLabels, DefaultMaxLabels)
	return l
}

// ValidEnvKey reports whether k may name an environment variable of a job or
// profile: [A-Za-z_][A-Za-z0-9_]{0,127}.
func ValidEnvKey(k string) bool {
	return len(k) > 0 && (k[0] < '0' || k[0] > '9') && validChars(k, 128, "_")
}

// ValidProfileName reports whether name may name a profile:
// [A-Za-z0-9_.-]{1,64}.
func ValidProfileName(name string) bool { return validChars(name, 64, "_.-") }

// jobFields are the job's fields, in the order errors list them, each with
// how its value is read into a Job; TestJobFieldsAreTheJobs keeps them the
// fields of Job's encoding.
var jobFields = []jobField{
	{"runId", func(r fieldReader, k string, j *Job) (err error) { j.RunID, err = r.str(k); return err }},
	{"profile", func(r fieldReader, k string, j *Job) (err error) { j.Profile, err = r.str(k); return err }},
	{"input", func(r fieldReader, k string, j *Job) (err error) { j.Input, err = r.str(k); return err }},
	{"args", func(r fieldReader, k string, j *Job) (err error) { j.Args, err = r.strList(k); return err }},
	{"env", func(r fieldReader, k string, j *Job) (err error) { j.Env, err = r.strMap(k); return err }},
	{"timeout", func(r fieldReader, k string, j *Job) (err error) { j.Timeout, err = r.duration(k); return err }},
	{"files", func(r fieldReader, k string, j *Job) (err error) { j.Files, err = r.strMap(k); return err }},
	{"labels", func(r fieldReader, k string, j *Job) (err error) { j.Labels, err = r.strMap(k); return err }},
	{"retries", readRetries},
	{"limits", func(r fieldReader, k string, j *Job) (err error) { j.Limits, err = r.strMap(k); return err }},
	{"outputs", func(r fieldReader, k string, j *Job) (err error) { j.Outputs, err = r.outputs(k); return err }},
	{"workspace", func(r fieldReader, k string, j *Job) (err error) {
		j.Workspace, err = decodeWorkspace(r, k)
		return err
	}},
	{"session", func(r fieldReader, k string, j *Job) (err error) { j.Session, err = r.str(k); return err }},
	{"policy", readPolicy},
	{"concurrencyKey", func(r fieldReader, k string, j *Job) (err error) { j.ConcurrencyKey, err = r.str(k); return err }},
	{"priority", func(r fieldReader, k string, j *Job) error {
		n, err := r.integer(k)
		if err == nil && (n < 0 || n > MaxPriority) {
			err = jobErr(ErrInvalidJob, "field \"priority\" is %d; it must be between %d and %d", n, MinPriority, MaxPriority)
		}
		j.Priority = int(n)
		return err
	}},
}

type jobField struct {
	name string
	read func(r fieldReader, key string, j *Job) error
}

// jobFieldNames lists jobFields' names, for errors.
var jobFieldNames = func() string {
	names := make([]string, len(jobFields))
	for i, f := range jobFields {
		names[i] = f.name
	}
	return strings.Join(names, ", ")
}()

func readRetries(r fieldReader, key string, j *Job) error {
	n, err := r.integer(key)
	if err == nil && (n < 0 || n > MaxRetries) {
		err = jobErr(ErrInvalidJob, "field \"retries\" is %d; it must be between 0 and %d", n, MaxRetries)
	}
	j.Retries = int(n)
	return err
}

// DecodeJob decodes and validates a job. It is msgpack when contentType (a
// Content-Type header value; parameters are ignored) is application/msgpack
// (or application/x-msgpack), and JSON otherwise. Decoding is strict: field
// names match exactly, unknown fields, duplicate keys, wrong types and data
// after the job are rejected, and a null value counts as an absent field.
// Every error wraps one of the job sentinels (see ReasonOf) and its message
// starts with what was wrong and names the field.
func DecodeJob(data []byte, contentType string, lim Limits) (Job, error) {
	lim = lim.withDefaults()
	if len(data) > lim.MaxBytes {
		return Job{}, jobErr(ErrOversize, "payload is %d bytes, limit %d", len(data), lim.MaxBytes)
	}
	var (
		j   Job
		err error
	)
	if isMsgpack(contentType) {
		j, err = decodeMsgpackJob(data)
	} else {
		j, err = decodeJSONJob(data)
	}
	if err != nil {
		return Job{}, err
	}
	if err := j.Validate(lim); err != nil {
		return Job{}, err
	}
	return j, nil
}

func isMsgpack(contentType string) bool {
	if contentType == "" {
		return false
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil && mt == "" {
		return false
	}
	return mt == ContentTypeMsgpack || mt == "application/x-msgpack"
}

// EncodeJob validates j against the default limits (all but MaxBytes, which
// the worker's configuration decides) and encodes it as JSON.
func EncodeJob(j Job) ([]byte, error) { return encodeJob(j, Limits{}) }

// EncodeWorkerJob is EncodeJob for a job a worker writes: it may carry
// the reserved baton.* labels (see Limits.ReservedLabels).
func EncodeWorkerJob(j Job) ([]byte, error) { return encodeJob(j, Limits{ReservedLabels: true}) }

func encodeJob(j Job, lim Limits) ([]byte, error) {
	if err := j.Validate(lim); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // prompts are full of < and &; keep them readable
	if err := enc.Encode(j); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// EncodeJobMsgpack is EncodeJob in msgpack; send it with Content-Type
// application/msgpack.
func EncodeJobMsgpack(j Job) ([]byte, error) {
	if err := j.Validate(Limits{}); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.SetSortMapKeys(true) // the same job always encodes to the same bytes
	if err := enc.Encode(j); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Validate checks j against lim (MaxBytes aside) and returns the first
// problem, in the order of the job's fields.
func (j Job) Validate(lim Limits) error {
	lim = lim.withDefaults()

	switch {
	case j.RunID == "":
		return jobErr(ErrBadRunID, "runId is missing")
	case !ValidRunID(j.RunID):
		return jobErr(ErrBadRunID, "runId %s must match [A-Za-z0-9_-]{1,128}", q(j.RunID))
	}

	if j.Retries < 0 || j.Retries > MaxRetries {
		return jobErr(ErrInvalidJob, "field \"retries\" is %d; it must be between 0 and %d", j.Retries, MaxRetries)
	}
	if err := validateOutputs(j.Outputs); err != nil {
		return err
	}
	if err := validateWorkspace(j.Workspace, j.Files); err != nil {
		return err
	}
	if err := validatePolicy(j.Policy); err != nil {
		return err
	}
	if j.Session != "" && j.Workspace != nil && j.Workspace.Git != nil {
		// A session's later turns start from its checkpoint, which a
		// clone would have to check out over.
		return jobErr(ErrInvalidJob, "workspace.git with \"session\": a session's workspace is its checkpoint's; clone the repository in the session's setup instead")
	}
	if j.Session != "" && !ValidSessionID(j.Session) {
		return jobErr(ErrInvalidJob, "session %s must match [A-Za-z0-9_-]{1,128}", q(j.Session))
	}
	if j.Session != "" && j.Retries > 0 {
		// A lost turn is the session's to take up again: its next run
		// starts from its last checkpoint, and the session record names
		// the run whose work was lost.
		return jobErr(ErrInvalidJob, "a session's run is not retried (\"retries\" with \"session\"): submit the session's next run instead")
	}
	if j.Retries > 0 && len(j.RunID) > MaxRetriedRunID {
		return jobErr(ErrBadRunID, "runId %s is %d bytes; with retries it may have at most %d (a retry is named <runId>-a<attempt>)", q(j.RunID), len(j.RunID), MaxRetriedRunID)
	}

	if j.ConcurrencyKey != "" && !ValidConcurrencyKey(j.ConcurrencyKey) {
		return jobErr(ErrInvalidJob, "concurrencyKey %s must match [A-Za-z0-9_-]{1,64}", q(j.ConcurrencyKey))
	}
	if j.Priority < 0 || j.Priority > MaxPriority {
		return jobErr(ErrInvalidJob, "field \"priority\" is %d; it must be between %d and %d", j.Priority, MinPriority, MaxPriority)
	}

	switch {
	case j.Profile == "":
		return jobErr(ErrInvalidJob, "field \"profile\" is missing")
	case !ValidProfileName(j.Profile):
		return jobErr(ErrInvalidJob, "profile %s must match [A-Za-z0-9_.-]{1,64}", q(j.Profile))
	}

	if len(j.Input) > lim.MaxInput {
		return jobErr(ErrOversize, "field \"input\" is %d bytes, limit %d", len(j.Input), lim.MaxInput)
	}
	if !utf8.ValidString(j.Input) {
		return jobErr(ErrInvalidJob, "field \"input\" is not valid UTF-8")
	}

	if len(j.Args) > lim.MaxArgs {
		return jobErr(ErrOversize, "field \"args\" has %d entries, limit %d", len(j.Args), lim.MaxArgs)
	}
	for i, a := range j.Args {
		if len(a) > MaxArgBytes {
			return jobErr(ErrOversize, "args[%d] is %d bytes, limit %d", i, len(a), MaxArgBytes)
		}
		if err := text(a); err != "" {
			return jobErr(ErrInvalidJob, "args[%d] %s", i, err)
		}
	}

	if len(j.Env) > lim.MaxEnv {
		return jobErr(ErrOversize, "field \"env\" has %d entries, limit %d", len(j.Env), lim.MaxEnv)
	}
	for _, k := range slices.Sorted(maps.Keys(j.Env)) {
		v := j.Env[k]
		if !ValidEnvKey(k) {
			return jobErr(ErrInvalidJob, "env key %s must match [A-Za-z_][A-Za-z0-9_]{0,127}", q(k))
		}
		if len(v) > MaxEnvValueBytes {
			return jobErr(ErrOversize, "env[%s] is %d bytes, limit %d", q(k), len(v), MaxEnvValueBytes)
		}
		if err := text(v); err != "" {
			return jobErr(ErrInvalidJob, "env[%s] %s", q(k), err)
		}
	}

	if j.Timeout < 0 {
		return jobErr(ErrInvalidJob, "field \"timeout\" must not be negative, got %s", time.Duration(j.Timeout))
	}

	if len(j.Files) > lim.MaxFiles {
		return jobErr(ErrOversize, "field \"files\" has %d entries, limit %d", len(j.Files), lim.MaxFiles)
	}
	total := 0
	for _, p := range slices.Sorted(maps.Keys(j.Files)) {
		c := j.Files[p]
		if why := checkFilePath(p); why != "" {
			return jobErr(ErrInvalidJob, "files[%s]: path %s", q(p), why)
		}
		// A path that is also another path's directory cannot be written.
		for i := range len(p) {
			if p[i] == '/' {
				if _, ok := j.Files[p[:i]]; ok {
					return jobErr(ErrInvalidJob, "files[%s]: %s is a file, so it cannot also be a directory", q(p), q(p[:i]))
				}
			}
		}
		if len(c) > MaxFileBytes {
			return jobErr(ErrOversize, "files[%s] is %d bytes, limit %d", q(p), len(c), MaxFileBytes)
		}
		if !utf8.ValidString(c) {
			return jobErr(ErrInvalidJob, "files[%s] content is not valid UTF-8", q(p))
		}
		total += len(c)
	}
	if total > MaxFilesTotalBytes {
		return jobErr(ErrOversize, "field \"files\" holds %d bytes in all, limit %d", total, MaxFilesTotalBytes)
	}

	if len(j.Labels) > lim.MaxLabels {
		return jobErr(ErrOversize, "field \"labels\" has %d entries, limit %d", len(j.Labels), lim.MaxLabels)
	}
	for _, k := range slices.Sorted(maps.Keys(j.Labels)) {
		v := j.Labels[k]
		switch {
		case k == "":
			return jobErr(ErrInvalidJob, "labels key must not be empty")
		case len(k) > MaxLabelKeyBytes:
			return jobErr(ErrOversize, "labels key %s is %d bytes, limit %d", q(k), len(k), MaxLabelKeyBytes)
		case len(v) > MaxLabelValueBytes:
			return jobErr(ErrOversize, "labels[%s] is %d bytes, limit %d", q(k), len(v), MaxLabelValueBytes)
		case !lim.ReservedLabels && strings.HasPrefix(strings.ToLower(k), ReservedLabelPrefix):
			return jobErr(ErrInvalidJob, "labels key %s: the prefix %q is reserved for baton", q(k), ReservedLabelPrefix)
		}
		if err := text(k); err != "" {
			return jobErr(ErrInvalidJob, "labels key %s %s", q(k), err)
		}
		if err := text(v); err != "" {
			return jobErr(ErrInvalidJob, "labels[%s] %s", q(k), err)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(j.Limits)) {
		if k != JobLimitOutput && k != JobLimitDisk && k != JobLimitOutputs {
			return jobErr(ErrInvalidJob, "limits key %s is not a limit a job may set (limits: %s, %s, %s)", q(k), JobLimitDisk, JobLimitOutput, JobLimitOutputs)
		}
		if n, err := ParseByteSize(j.Limits[k]); err != nil || n == 0 {
			return jobErr(ErrInvalidJob, "limits[%s] %s is not a size like \"1MiB\" above zero", q(k), q(j.Limits[k]))
		}
	}
	return nil
}

// text says what is wrong with s as a string a process receives (argv, env):
// it must be UTF-8 without NUL, which would silently cut it short.
func text(s string) string {
	if strings.IndexByte(s, 0) >= 0 {
		return "must not contain NUL bytes"
	}
	if !utf8.ValidString(s) {
		return "is not valid UTF-8"
	}
	return ""
}

// checkFilePath says what is wrong with p as a workspace file path, or "".
func checkFilePath(p string) string {
	if rest, home := strings.CutPrefix(p, HomeFilePrefix); home {
		p = rest
	}
	switch {
	case p == "":
		return "must not be empty"
	case len(p) > MaxFilePathBytes:
		return fmt.Sprintf("is %d bytes, limit %d", len(p), MaxFilePathBytes)
	case strings.IndexByte(p, 0) >= 0:
		return "must not contain NUL bytes"
	case !utf8.ValidString(p):
		return "is not valid UTF-8"
	case p[0] == '/':
		return "must be relative to the workspace (or, after ~/, to the agent's home)"
	case p[len(p)-1] == '/':
		return "must name a file, not end in /"
	case p == ".":
		return "must name a file"
	}
	if n := strings.Count(p, "/") + 1; n > MaxFilePathDepth {
		return fmt.Sprintf("is %d levels deep, limit %d", n, MaxFilePathDepth)
	}
	for c := range strings.SplitSeq(p, "/") {
		if c == ".." {
			return "must not contain \"..\""
		}
		if len(c) > MaxPathComponent {
			return fmt.Sprintf("has a component of %d bytes, limit %d", len(c), MaxPathComponent)
		}
	}
	if c := path.Clean(p); c != p {
		return fmt.Sprintf("must be clean (did you mean %s?)", q(c))
	}
	return ""
}

// jobErr makes a rejection: the sentinel's message, then the detail.
func jobErr(kind error, format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{kind}, args...)...)
}

// q quotes a value from the job for an error message, cut to a length a
// person (and a NATS header) can carry.
func q(s string) string {
	const limit = 64
	if len(s) <= limit {
		return strconv.Quote(s)
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + "…"
}

// fieldReader reads one field's value in either encoding; a null reads as
// the zero value, as if the field were absent.
type fieldReader interface {
	str(field string) (string, error)
	strList(field string) ([]string, error)
	strMap(field string) (map[string]string, error)
	duration(field string) (Duration, error)
	integer(field string) (int64, error)
	outputs(field string) (*JobOutputs, error)
	object(field, want string, keys []string, value func(key string) error) (bool, error)
}

// decodeField reads the value of key into j; seen catches duplicate keys.
func decodeField(r fieldReader, key string, seen map[string]bool, j *Job) error {
	at := slices.IndexFunc(jobFields, func(f jobField) bool { return f.name == key })
	if at < 0 {
		return jobErr(ErrUnknownField, "field %s is not part of a job (fields: %s)", q(key), jobFieldNames)
	}
	if seen[key] {
		return jobErr(ErrMalformedJob, "field %s appears twice", q(key))
	}
	seen[key] = true
	return jobFields[at].read(r, key, j)
}

// normalize makes empty lists and maps nil, so a job compares equal to its
// re-encoding (which omits them).
func normalize(j *Job) {
	if len(j.Args) == 0 {
		j.Args = nil
	}
	if len(j.Env) == 0 {
		j.Env = nil
	}
	if len(j.Files) == 0 {
		j.Files = nil
	}
	if len(j.Labels) == 0 {
		j.Labels = nil
	}
	if len(j.Limits) == 0 {
		j.Limits = nil
	}
	normalizeOutputs(j)
	normalizePolicy(j)
}

func wrongType(field, want, got string) error {
	return jobErr(ErrMalformedJob, "field %q must be %s, not %s", field, want, got)
}

const durationWant = `a duration string like "90s" or a number of seconds`

// parseDurationString is Duration's string form, with errors for a job.
func parseDurationString(field, s string) (Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, jobErr(ErrInvalidJob, "field %q: %s is not a duration; write one like \"90s\" or \"10m\"", field, q(s))
	}
	if d < 0 {
		return 0, jobErr(ErrInvalidJob, "field %q must not be negative, got %s", field, q(s))
	}
	return Duration(d), nil
}

func durationSeconds(field string, secs float64) (Duration, error) {
	d, err := secondsToDuration(secs)
	if err != nil {
		return 0, jobErr(ErrInvalidJob, "field %q: %v", field, err)
	}
	return d, nil
}

// secondsToDuration converts a number of seconds, refusing what a Duration
// cannot hold rather than wrapping around.
func secondsToDuration(secs float64) (Duration, error) {
	ns := secs * float64(time.Second)
	switch {
	case math.IsNaN(secs):
		return 0, errors.New("duration must be a number of seconds, not NaN")
	case secs < 0:
		return 0, errors.New("duration must not be negative")
	case ns >= math.MaxInt64: // as a float64 this is 2⁶³, the first value out of range
		return 0, fmt.Errorf("duration of %g seconds is too long", secs)
	}
	return Duration(ns), nil
}

// ---- JSON

const jsonSpace = " \t\r\n"

func decodeJSONJob(data []byte) (Job, error) {
	if len(bytes.TrimLeft(data, jsonSpace)) == 0 {
		return Job{}, jobErr(ErrMalformedJob, `payload is empty; send a JSON object like {"runId":"r1","profile":"demo"}`)
	}
	if !utf8.Valid(data) {
		return Job{}, jobErr(ErrMalformedJob, "payload is not valid UTF-8 JSON")
	}
	r := &jsonReader{dec: json.NewDecoder(bytes.NewReader(data))}
	r.dec.UseNumber()
	tok, err := r.token()
	if err != nil {
		return Job{}, err
	}
	if tok != json.Delim('{') {
		return Job{}, jobErr(ErrMalformedJob, "job must be a JSON object, not %s", jsonKind(tok))
	}
	var j Job
	seen := map[string]bool{}
	for {
		tok, err := r.token()
		if err != nil {
			return Job{}, err
		}
		if tok == json.Delim('}') {
			break
		}
		key, _ := tok.(string) // the decoder allows only strings as keys
		if err := decodeField(r, key, seen, &j); err != nil {
			return Job{}, err
		}
	}
	if rest := bytes.TrimLeft(data[r.dec.InputOffset():], jsonSpace); len(rest) > 0 {
		return Job{}, jobErr(ErrMalformedJob, "unexpected data after the job object at byte %d", len(data)-len(rest))
	}
	normalize(&j)
	return j, nil
}

type jsonReader struct{ dec *json.Decoder }

func (r *jsonReader) token() (json.Token, error) {
	tok, err := r.dec.Token()
	if err == nil {
		return tok, nil
	}
	var syn *json.SyntaxError
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return nil, jobErr(ErrMalformedJob, "JSON ends before the job object is complete")
	case errors.As(err, &syn):
		return nil, jobErr(ErrMalformedJob, "invalid JSON at byte %d: %s", syn.Offset, syn.Error())
	}
	return nil, jobErr(ErrMalformedJob, "invalid JSON: %v", err)
}

func (r *jsonReader) str(field string) (string, error) {
	tok, err := r.token()
	if err != nil {
		return "", err
	}
	switch v := tok.(type) {
	case string:
		return v, nil
	case nil:
		return "", nil
	}
	return "", wrongType(field, "a string", jsonKind(tok))
}

func (r *jsonReader) strList(field string) ([]string, error) {
	const want = "an array of strings"
	tok, err := r.token()
	if err != nil || tok == nil {
		return nil, err
	}
	if tok != json.Delim('[') {
		return nil, wrongType(field, want, jsonKind(tok))
	}
	var out []string
	for i := 0; ; i++ {
		tok, err := r.token()
		if err != nil {
			return nil, err
		}
		switch v := tok.(type) {
		case string:
			out = append(out, v)
			continue
		case json.Delim:
			if v == ']' {
				return out, nil
			}
		}
		return nil, jobErr(ErrMalformedJob, "field %q must be %s; element %d is %s", field, want, i, jsonKind(tok))
	}
}

func (r *jsonReader) strMap(field string) (map[string]string, error) {
	const want = "an object of strings"
	tok, err := r.token()
	if err != nil || tok == nil {
		return nil, err
	}
	if tok != json.Delim('{') {
		return nil, wrongType(field, want, jsonKind(tok))
	}
	out := map[string]string{}
	for {
		tok, err := r.token()
		if err != nil {
			return nil, err
		}
		if tok == json.Delim('}') {
			return out, nil
		}
		key, _ := tok.(string)
		if _, dup := out[key]; dup {
			return nil, jobErr(ErrMalformedJob, "field %q has the key %s twice", field, q(key))
		}
		tok, err = r.token()
		if err != nil {
			return nil, err
		}
		v, ok := tok.(string)
		if !ok {
			return nil, jobErr(ErrMalformedJob, "field %q must be %s; the value of %s is %s", field, want, q(key), jsonKind(tok))
		}
		out[key] = v
	}
}

func (r *jsonReader) integer(field string) (int64, error) {
	tok, err := r.token()
	if err != nil || tok == nil {
		return 0, err
	}
	if v, ok := tok.(json.Number); ok {
		if n, err := strconv.ParseInt(string(v), 10, 64); err == nil {
			return n, nil
		}
	}
	return 0, wrongType(field, "a whole number", jsonKind(tok))
}

func (r *jsonReader) duration(field string) (Duration, error) {
	tok, err := r.token()
	if err != nil || tok == nil {
		return 0, err
	}
	switch v := tok.(type) {
	case string:
		return parseDurationString(field, v)
	case json.Number:
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil {
			return 0, jobErr(ErrInvalidJob, "field %q: %s seconds is out of range", field, v)
		}
		return durationSeconds(field, f)
	}
	return 0, wrongType(field, durationWant, jsonKind(tok))
}

func jsonKind(tok json.Token) string {
	switch v := tok.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case json.Delim:
		if v == '[' {
			return "an array"
		}
		return "an object"
	}
	return fmt.Sprintf("%T", tok)
}

// ---- msgpack

func decodeMsgpackJob(data []byte) (Job, error) {
	br := bytes.NewReader(data) // a ByteScanner, so the decoder reads no further than it must
	r := &msgpackReader{dec: msgpack.NewDecoder(br), data: data, rest: br}
	c, err := r.peek()
	if err != nil {
		return Job{}, jobErr(ErrMalformedJob, "payload is empty; send a msgpack map with runId and profile")
	}
	if !isMapCode(c) {
		return Job{}, jobErr(ErrMalformedJob, "job must be a msgpack map, not %s", msgpackKind(c))
	}
	n, err := r.length(r.dec.DecodeMapLen())
	if err != nil {
		return Job{}, err
	}
	var j Job
	seen := map[string]bool{}
	for range n {
		c, err := r.peek()
		if err != nil {
			return Job{}, err
		}
		if !isStringCode(c) {
			return Job{}, jobErr(ErrMalformedJob, "job keys must be strings, found %s", msgpackKind(c))
		}
		key, err := r.string()
		if err != nil {
			return Job{}, err
		}
		if err := decodeField(r, key, seen, &j); err != nil {
			return Job{}, err
		}
	}
	if br.Len() > 0 {
		return Job{}, jobErr(ErrMalformedJob, "unexpected data after the job map: %d bytes", br.Len())
	}
	normalize(&j)
	return j, nil
}

type msgpackReader struct {
	dec  *msgpack.Decoder
	data []byte
	rest *bytes.Reader // what dec has not read of data
}

// string decodes a str or bin, refusing a length the payload cannot hold
// before the decoder allocates for it.
func (r *msgpackReader) string() (string, error) {
	b := r.data[len(r.data)-r.rest.Len():]
	var hdr, n int
	switch c := b[0]; {
	case msgpcode.IsFixedString(c):
		hdr, n = 1, int(c&msgpcode.FixedStrMask)
	case (c == msgpcode.Str8 || c == msgpcode.Bin8) && len(b) >= 2:
		hdr, n = 2, int(b[1])
	case (c == msgpcode.Str16 || c == msgpcode.Bin16) && len(b) >= 3:
		hdr, n = 3, int(binary.BigEndian.Uint16(b[1:]))
	case (c == msgpcode.Str32 || c == msgpcode.Bin32) && len(b) >= 5:
		hdr, n = 5, int(binary.BigEndian.Uint32(b[1:]))
	}
	if hdr == 0 || hdr+n > len(b) {
		return "", r.fail(io.ErrUnexpectedEOF)
	}
	s, err := r.dec.DecodeString()
	if err != nil {
		return "", r.fail(err)
	}
	return s, nil
}

// length checks a map or array length against what is left of the payload,
// each entry taking at least one byte.
func (r *msgpackReader) length(n int, err error) (int, error) {
	if err != nil {
		return 0, r.fail(err)
	}
	if n > r.rest.Len() {
		return 0, r.fail(io.ErrUnexpectedEOF)
	}
	return n, nil
}

func (r *msgpackReader) fail(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return jobErr(ErrMalformedJob, "msgpack ends before the job map is complete")
	}
	return jobErr(ErrMalformedJob, "invalid msgpack: %v", err)
}

func (r *msgpackReader) peek() (byte, error) {
	c, err := r.dec.PeekCode()
	if err != nil {
		return 0, r.fail(err)
	}
	return c, nil
}

// null consumes a nil and reports whether there was one.
func (r *msgpackReader) null() (bool, error) {
	c, err := r.peek()
	if err != nil || c != msgpcode.Nil {
		return false, err
	}
	if err := r.dec.DecodeNil(); err != nil {
		return false, r.fail(err)
	}
	return true, nil
}

func (r *msgpackReader) str(field string) (string, error) {
	if null, err := r.null(); err != nil || null {
		return "", err
	}
	c, _ := r.peek() // null peeked already
	if !isStringCode(c) {
		return "", wrongType(field, "a string", msgpackKind(c))
	}
	return r.string()
}

func (r *msgpackReader) strList(field string) ([]string, error) {
	const want = "an array of strings"
	if null, err := r.null(); err != nil || null {
		return nil, err
	}
	c, _ := r.peek() // null peeked already
	if !isArrayCode(c) {
		return nil, wrongType(field, want, msgpackKind(c))
	}
	n, err := r.length(r.dec.DecodeArrayLen())
	if err != nil {
		return nil, err
	}
	var out []string
	for i := range n {
		c, err := r.peek()
		if err != nil {
			return nil, err
		}
		if !isStringCode(c) {
			return nil, jobErr(ErrMalformedJob, "field %q must be %s; element %d is %s", field, want, i, msgpackKind(c))
		}
		s, err := r.string()
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func (r *msgpackReader) strMap(field string) (map[string]string, error) {
	const want = "a map of strings"
	if null, err := r.null(); err != nil || null {
		return nil, err
	}
	c, _ := r.peek()
	if !isMapCode(c) {
		return nil, wrongType(field, want, msgpackKind(c))
	}
	n, err := r.length(r.dec.DecodeMapLen())
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for range n {
		c, err := r.peek()
		if err != nil {
			return nil, err
		}
		if !isStringCode(c) {
			return nil, jobErr(ErrMalformedJob, "field %q must be %s; found a key that is %s", field, want, msgpackKind(c))
		}
		key, err := r.string()
		if err != nil {
			return nil, err
		}
		if _, dup := out[key]; dup {
			return nil, jobErr(ErrMalformedJob, "field %q has the key %s twice", field, q(key))
		}
		if c, err = r.peek(); err != nil {
			return nil, err
		}
		if !isStringCode(c) {
			return nil, jobErr(ErrMalformedJob, "field %q must be %s; the value of %s is %s", field, want, q(key), msgpackKind(c))
		}
		v, err := r.string()
		if err != nil {
			return nil, err
		}
		out[key] = v
	}
	return out, nil
}

func (r *msgpackReader) integer(field string) (int64, error) {
	if null, err := r.null(); err != nil || null {
		return 0, err
	}
	c, _ := r.peek()
	if !isNumberCode(c) {
		return 0, wrongType(field, "a whole number", "another type")
	}
	v, err := r.dec.DecodeInterfaceLoose()
	if err != nil {
		return 0, r.fail(err)
	}
	switch x := v.(type) {
	case int64:
		return x, nil
	case uint64:
		if x <= math.MaxInt64 {
			return int64(x), nil
		}
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return int64(x), nil
		}
	}
	return 0, wrongType(field, "a whole number", "a number that is not one")
}

func (r *msgpackReader) duration(field string) (Duration, error) {
	if null, err := r.null(); err != nil || null {
		return 0, err
	}
	c, _ := r.peek()
	switch {
	case isStringCode(c):
		s, err := r.string()
		if err != nil {
			return 0, err
		}
		return parseDurationString(field, s)
	case isNumberCode(c):
		v, err := r.dec.DecodeInterfaceLoose() // int64, uint64 or float64
		if err != nil {
			return 0, r.fail(err)
		}
		var secs float64
		switch x := v.(type) {
		case int64:
			secs = float64(x)
		case uint64:
			secs = float64(x)
		case float64:
			secs = x
		}
		return durationSeconds(field, secs)
	}
	return 0, wrongType(field, durationWant, msgpackKind(c))
}

func isMapCode(c byte) bool {
	return msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32
}

func isArrayCode(c byte) bool {
	return msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32
}

// isStringCode accepts bin as well as str: older encoders write strings as bin.
func isStringCode(c byte) bool { return msgpcode.IsString(c) || msgpcode.IsBin(c) }

func isNumberCode(c byte) bool {
	switch c {
	case msgpcode.Float, msgpcode.Double,
		msgpcode.Uint8, msgpcode.Uint16, msgpcode.Uint32, msgpcode.Uint64,
		msgpcode.Int8, msgpcode.Int16, msgpcode.Int32, msgpcode.Int64:
		return true
	}
	return msgpcode.IsFixedNum(c)
}

func msgpackKind(c byte) string {
	switch {
	case c == msgpcode.Nil:
		return "nil"
	case c == msgpcode.True || c == msgpcode.False:
		return "a boolean"
	case isNumberCode(c):
		return "a number"
	case isStringCode(c):
		return "a string"
	case isArrayCode(c):
		return "an array"
	case isMapCode(c):
		return "a map"
	case msgpcode.IsExt(c):
		return "an extension value"
	}
	return fmt.Sprintf("an invalid value (code 0x%02x)", c)
}
