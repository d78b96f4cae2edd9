package protocol_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/batonhq/baton/protocol"
)

func TestJobWorkspace(t *testing.T) {
	for _, tc := range []struct {
		name, json string
		want       *protocol.WorkspaceRef
		err        error
	}{
		{"object", `{"object":"sha256-ab.tar.gz"}`, &protocol.WorkspaceRef{Object: "sha256-ab.tar.gz"}, nil},
		{"unicode name", `{"object":"dépôt/v1.tar"}`, &protocol.WorkspaceRef{Object: "dépôt/v1.tar"}, nil},
		{"longest name", `{"object":"` + strings.Repeat("a", protocol.MaxWorkspaceObjectBytes) + `"}`, &protocol.WorkspaceRef{Object: strings.Repeat("a", protocol.MaxWorkspaceObjectBytes)}, nil},
		{"null", `null`, nil, nil},
		{"empty", `{}`, nil, protocol.ErrInvalidJob},
		{"null object", `{"object":null}`, nil, protocol.ErrInvalidJob},
		{"empty object", `{"object":""}`, nil, protocol.ErrInvalidJob},
		{"long name", `{"object":"` + strings.Repeat("a", protocol.MaxWorkspaceObjectBytes+1) + `"}`, nil, protocol.ErrInvalidJob},
		{"newline", `{"object":"a\nb"}`, nil, protocol.ErrInvalidJob},
		{"NUL", `{"object":"a\u0000b"}`, nil, protocol.ErrInvalidJob},
		{"a string", `"repo.tar"`, nil, protocol.ErrMalformedJob},
		{"a list", `["repo.tar"]`, nil, protocol.ErrMalformedJob},
		{"object number", `{"object":7}`, nil, protocol.ErrMalformedJob},
		{"unknown key", `{"object":"a","digest":"x"}`, nil, protocol.ErrUnknownField},
		{"twice", `{"object":"a","object":"b"}`, nil, protocol.ErrMalformedJob},
		{"git", `{"git":{"url":"https://git.example.com/org/repo.git","ref":"main","depth":3}}`, &protocol.WorkspaceRef{Git: &protocol.GitSource{URL: "https://git.example.com/org/repo.git", Ref: "main", Depth: 3}}, nil},
		{"git url only", `{"git":{"url":"http://git.internal:8080/repo"}}`, &protocol.WorkspaceRef{Git: &protocol.GitSource{URL: "http://git.internal:8080/repo"}}, nil},
		{"git commit", `{"git":{"url":"https://h/r","ref":"` + strings.Repeat("ab", 20) + `"}}`, &protocol.WorkspaceRef{Git: &protocol.GitSource{URL: "https://h/r", Ref: strings.Repeat("ab", 20)}}, nil},
		{"git full ref", `{"git":{"url":"https://h/r","ref":"refs/tags/v1.2"}}`, &protocol.WorkspaceRef{Git: &protocol.GitSource{URL: "https://h/r", Ref: "refs/tags/v1.2"}}, nil},
		{"git and object", `{"object":"a","git":{"url":"https://h/r"}}`, nil, protocol.ErrInvalidJob},
		{"git null", `{"git":null}`, nil, protocol.ErrInvalidJob},
		{"git no url", `{"git":{"ref":"main"}}`, nil, protocol.ErrInvalidJob},
		{"git ssh", `{"git":{"url":"ssh://git@h/r"}}`, nil, protocol.ErrInvalidJob},
		{"git scp-like", `{"git":{"url":"git@h:r.git"}}`, nil, protocol.ErrInvalidJob},
		{"git file", `{"git":{"url":"file:///etc"}}`, nil, protocol.ErrInvalidJob},
		{"git ext", `{"git":{"url":"ext::sh -c id"}}`, nil, protocol.ErrInvalidJob},
		{"git option", `{"git":{"url":"--upload-pack=id"}}`, nil, protocol.ErrInvalidJob},
		{"git user", `{"git":{"url":"https://x-access-token@h/r"}}`, nil, protocol.ErrInvalidJob},
		{"git password", `{"git":{"url":"https://u:ghp_secret@h/r"}}`, nil, protocol.ErrInvalidJob},
		{"git no host", `{"git":{"url":"https:///r"}}`, nil, protocol.ErrInvalidJob},
		{"git fragment", `{"git":{"url":"https://h/r#x"}}`, nil, protocol.ErrInvalidJob},
		{"git space", `{"git":{"url":"https://h/r x"}}`, nil, protocol.ErrInvalidJob},
		{"git long url", `{"git":{"url":"https://h/` + strings.Repeat("a", protocol.MaxGitURLBytes) + `"}}`, nil, protocol.ErrInvalidJob},
		{"git ref option", `{"git":{"url":"https://h/r","ref":"--upload-pack=id"}}`, nil, protocol.ErrInvalidJob},
		{"git ref dotdot", `{"git":{"url":"https://h/r","ref":"a..b"}}`, nil, protocol.ErrInvalidJob},
		{"git ref colon", `{"git":{"url":"https://h/r","ref":"a:b"}}`, nil, protocol.ErrInvalidJob},
		{"git ref reflog", `{"git":{"url":"https://h/r","ref":"main@{1}"}}`, nil, protocol.ErrInvalidJob},
		{"git ref lock", `{"git":{"url":"https://h/r","ref":"main.lock"}}`, nil, protocol.ErrInvalidJob},
		{"git ref hidden", `{"git":{"url":"https://h/r","ref":"refs/.x"}}`, nil, protocol.ErrInvalidJob},
		{"git ref space", `{"git":{"url":"https://h/r","ref":"a b"}}`, nil, protocol.ErrInvalidJob},
		{"git negative depth", `{"git":{"url":"https://h/r","depth":-1}}`, nil, protocol.ErrInvalidJob},
		{"git huge depth", `{"git":{"url":"https://h/r","depth":99999999999999}}`, nil, protocol.ErrInvalidJob},
		{"git depth string", `{"git":{"url":"https://h/r","depth":"1"}}`, nil, protocol.ErrMalformedJob},
		{"git a string", `{"git":"https://h/r"}`, nil, protocol.ErrMalformedJob},
		{"git unknown key", `{"git":{"url":"https://h/r","token":"x"}}`, nil, protocol.ErrUnknownField},
		{"git twice", `{"git":{"url":"https://h/r","url":"https://h/s"}}`, nil, protocol.ErrMalformedJob},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j, err, mj, merr := decodeWithField(t, "workspace", tc.json)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("json: %v, want %v", err, tc.err)
				}
				if !strings.Contains(err.Error(), "workspace") {
					t.Errorf("json: error %q does not name the field", err)
				}
			} else if err != nil || !reflect.DeepEqual(j.Workspace, tc.want) {
				t.Fatalf("json: %+v, %v", j.Workspace, err)
			}
			j, err = mj, merr
			if tc.err != nil {
				if !errors.Is(err, tc.err) && !strings.HasSuffix(tc.name, "twice") { // a Go map has no duplicate key
					t.Fatalf("msgpack: %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(j.Workspace, tc.want) {
				t.Fatalf("msgpack: %+v, %v", j.Workspace, err)
			}
			if tc.want == nil {
				return
			}
			for _, enc := range []func(protocol.Job) ([]byte, error){protocol.EncodeJob, protocol.EncodeJobMsgpack} {
				b, err := enc(j)
				if err != nil {
					t.Fatal(err)
				}
				ct := ""
				if b[0] != '{' {
					ct = protocol.ContentTypeMsgpack
				}
				back, err := protocol.DecodeJob(b, ct, protocol.Limits{})
				if err != nil || !reflect.DeepEqual(back, j) {
					t.Fatalf("re-encoded %q: %+v, %v", b, back, err)
				}
			}
		})
	}
}

// TestJobWorkspaceGitFiles: a repository is cloned into an empty
// workspace, so only the home's seed files go with it.
func TestJobWorkspaceGitFiles(t *testing.T) {
	git := &protocol.WorkspaceRef{Git: &protocol.GitSource{URL: "https://h/r"}}
	j := protocol.Job{RunID: "r", Profile: "p", Workspace: git, Files: map[string]string{"~/.config/x": "y"}}
	if err := j.Validate(protocol.Limits{}); err != nil {
		t.Fatalf("home file with a repository: %v", err)
	}
	j.Files["README"] = "z"
	err := j.Validate(protocol.Limits{})
	if !errors.Is(err, protocol.ErrInvalidJob) || !strings.Contains(err.Error(), "https://h/r") || !strings.Contains(err.Error(), "README") {
		t.Fatalf("workspace file with a repository: %v", err)
	}
}

// TestGitErrorsNameTheRepository: a rejected repository's reason names it
// and what is wrong, and never a credential the URL carried.
func TestGitErrorsNameTheRepository(t *testing.T) {
	for url, want := range map[string]string{
		"ssh://h/r":            "https://",
		"https://u:s3cr3t@h/r": "credential",
		"https://s3cr3t@h/r":   "credential",
		"https://u:s3cr3t@/r":  "https://…@/r",
	} {
		j := protocol.Job{RunID: "r", Profile: "p", Workspace: &protocol.WorkspaceRef{Git: &protocol.GitSource{URL: url}}}
		err := j.Validate(protocol.Limits{})
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "workspace.git.url") {
			t.Errorf("%s: %v, want a reason saying %q", url, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("%s: the reason %q holds the URL's password", url, err)
		}
	}
}
