package protocol_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/batonhq/baton/protocol"
)

// FuzzDecodeJob feeds JSON and msgpack bytes to DecodeJob. Properties: it
// never panics; an accepted job re-encodes, in both encodings, to bytes that
// decode to an equal job; a rejection wraps a job sentinel, maps to a
// non-empty Reason and fits on one header line.
func FuzzDecodeJob(f *testing.F) {
	gitJob := protocol.Job{RunID: "r", Profile: "p", Files: map[string]string{"~/.netrc": ""},
		Workspace: &protocol.WorkspaceRef{Git: &protocol.GitSource{URL: "https://h/r.git", Ref: "refs/heads/main", Depth: 5}}}
	for _, j := range []protocol.Job{fullJob(), {RunID: "r", Profile: "demo"}, gitJob} {
		js, err := protocol.EncodeJob(j)
		if err != nil {
			f.Fatal(err)
		}
		mp, err := protocol.EncodeJobMsgpack(j)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(js, false)
		f.Add(mp, true)
	}
	for _, s := range []string{
		``, `null`, `[]`, `{}`, `{"runId":"a.b","profile":"p"}`,
		`{"runId":"r","profile":"p","timeout":90}`,
		`{"runId":"r","profile":"p","timeout":1e400}`,
		`{"runId":"r","runId":"r","profile":"p"}`,
		`{"runId":"r","profile":"p","env":{"A":"1","A":"1"}}`,
		`{"runId":"r","profile":"p","files":{"a":"x","a/b":"y"}}`,
		`{"runId":"r","profile":"p","files":{"../x":""}}`,
		`{"runId":"r","profile":"p","args":["a",null]}`,
		`{"runId":"r","profile":"p"} {}`,
		`{"runId":"r","profile":"p","labels":{"k":"v"},"input":"\u0000"}`,
		`{"runId":"r","profile":"p","labels":{"baton.attempt":"2","baton.retryOf":"q"}}`,
		`{"runId":"r","profile":"p","limits":{"disk":"-1"}}`,
		`{"runId":"r","profile":"p","limits":{"disk":"16MiB","output":"4KiB"}}`,
		`{"runId":"r","profile":"p","outputs":{"diff":false,"files":["out/**"]}}`,
		`{"runId":"r","profile":"p","outputs":{"diff":null,"files":[]}}`,
		`{"runId":"r","profile":"p","outputs":{"tar":1}}`,
		`{"runId":"r","profile":"p","workspace":{"object":"sha256-00.tar.gz"}}`,
		`{"runId":"r","profile":"p","workspace":{"object":null}}`,
		`{"runId":"r","profile":"p","workspace":{"object":"a","object":"b"}}`,
		`{"runId":"r","profile":"p","workspace":"repo.tar"}`,
		`{"runId":"r","profile":"p","workspace":{"git":{"url":"https://git.example.com/r.git","ref":"main","depth":2}}}`,
		`{"runId":"r","profile":"p","workspace":{"git":{"url":"https://u:p@h/r"}}}`,
		`{"runId":"r","profile":"p","workspace":{"git":{"url":"ext::sh","ref":"-x","depth":-1}}}`,
		`{"runId":"r","profile":"p","workspace":{"git":{"url":"https://h/r"},"object":"a"}}`,
		`{"runId":"r","profile":"p","workspace":{"git":{"url":"https://h/r"}},"files":{"a":"b","~/c":"d"}}`,
		`{"runId":"r","profile":"p","policy":{"default":"deny","allow":["Read","Bash(git status*)"],"deny":["Bash(curl *)"]}}`,
		`{"runId":"r","profile":"p","policy":{"default":"maybe","ask":["Bash(","x y"]}}`,
		`{"runId":"r","profile":"p","policy":{"allow":[],"deny":null}}`,
		`{"runId":"r","profile":"p","concurrencyKey":"acme","priority":5}`,
		`{"runId":"r","profile":"p","concurrencyKey":"a.b","priority":9}`,
		`{"runId":"r","profile":"p","concurrencyKey":"","priority":0}`,
	} {
		f.Add([]byte(s), false)
	}
	f.Add([]byte{0x82, 0xa5, 'r', 'u', 'n', 'I', 'd', 0xa1, 'r', 0xa7, 'p', 'r', 'o', 'f', 'i', 'l', 'e', 0xa1, 'p'}, true)
	f.Add([]byte{0x83, 0xa5, 'r', 'u', 'n', 'I', 'd', 0xa1, 'r', 0xa7, 'p', 'r', 'o', 'f', 'i', 'l', 'e', 0xa1, 'p', 0xa7, 't', 'i', 'm', 'e', 'o', 'u', 't', 0xcb, 0x7f, 0xf0, 0, 0, 0, 0, 0, 0}, true)
	f.Add([]byte{0xdf, 0xff, 0xff, 0xff, 0xff}, true)
	// {"runId":"r","profile":"p","workspace":{"object":"a"}}
	f.Add([]byte{0x83, 0xa5, 'r', 'u', 'n', 'I', 'd', 0xa1, 'r', 0xa7, 'p', 'r', 'o', 'f', 'i', 'l', 'e', 0xa1, 'p',
		0xa9, 'w', 'o', 'r', 'k', 's', 'p', 'a', 'c', 'e', 0x81, 0xa6, 'o', 'b', 'j', 'e', 'c', 't', 0xa1, 'a'}, true)

	f.Fuzz(func(t *testing.T, data []byte, mp bool) {
		ct := protocol.ContentTypeJSON
		if mp {
			ct = protocol.ContentTypeMsgpack
		}
		j, err := protocol.DecodeJob(data, ct, protocol.Limits{})
		if err != nil {
			wrapped := false
			for _, s := range sentinels {
				wrapped = wrapped || errors.Is(err, s)
			}
			if !wrapped {
				t.Fatalf("error %q wraps no job sentinel", err)
			}
			if protocol.ReasonOf(err) == "" {
				t.Fatalf("error %q has no reason", err)
			}
			if strings.ContainsAny(err.Error(), "\r\n") {
				t.Fatalf("error %q spans lines", err)
			}
			return
		}
		for _, enc := range []struct {
			ct     string
			encode func(protocol.Job) ([]byte, error)
		}{
			{protocol.ContentTypeJSON, protocol.EncodeJob},
			{protocol.ContentTypeMsgpack, protocol.EncodeJobMsgpack},
		} {
			b, err := enc.encode(j)
			if err != nil {
				t.Fatalf("accepted job %+v does not encode as %s: %v", j, enc.ct, err)
			}
			again, err := protocol.DecodeJob(b, enc.ct, protocol.Limits{MaxBytes: 8 << 20})
			if err != nil {
				t.Fatalf("re-encoded job (%s) is rejected: %v\n%q", enc.ct, err, b)
			}
			if !reflect.DeepEqual(again, j) {
				t.Fatalf("%s round trip changed the job:\n got %+v\nwant %+v", enc.ct, again, j)
			}
		}
	})
}
