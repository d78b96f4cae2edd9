package protocol

import (
	"encoding/json"
	"strings"

	"github.com/vmihailenco/msgpack/v5"
)

// PeekRunID finds the run id of a job that may not decode as a job: one a
// worker rejected, so that its rejection can be told to whoever watches that
// run. It decodes leniently (any other field, of any type, is ignored) and,
// when even that fails (a cut or malformed payload), looks for a "runId"
// member in the first bytes. It returns "" unless what it finds is a valid
// run id.
func PeekRunID(data []byte, contentType string) string {
	var id string
	if isMsgpack(contentType) {
		var j struct {
			RunID string `msgpack:"runId"`
		}
		if msgpack.Unmarshal(data, &j) == nil {
			id = j.RunID
		}
	} else {
		var j struct {
			RunID string `json:"runId"`
		}
		if err := json.Unmarshal(data, &j); err == nil {
			id = j.RunID
		} else {
			id = scanRunID(data)
		}
	}
	if !ValidRunID(id) {
		return ""
	}
	return id
}

// peekWindow bounds how far scanRunID looks: a job's runId comes first
// from every publisher we know, and a rejected job can be megabytes.
const peekWindow = 4096

// scanRunID is the value of the first "runId" member in data's first bytes,
// if it is a string.
func scanRunID(data []byte) string {
	s := string(data[:min(len(data), peekWindow)])
	i := strings.Index(s, `"runId"`)
	if i < 0 {
		return ""
	}
	rest := strings.TrimLeft(s[i+len(`"runId"`):], " \t\r\n")
	rest, ok := strings.CutPrefix(rest, ":")
	if !ok {
		return ""
	}
	rest = strings.TrimLeft(rest, " \t\r\n")
	rest, ok = strings.CutPrefix(rest, `"`)
	if !ok {
		return ""
	}
	id, _, ok := strings.Cut(rest, `"`)
	if !ok {
		return ""
	}
	return id
}
