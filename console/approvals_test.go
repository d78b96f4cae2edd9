package console_test

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/batonhq/baton/console"
)

// TestApproveRefusals: an answer the console cannot send is refused
// before any worker is asked: a bad body, a bad runId, a read-only
// console; with no worker to answer, the page is told so.
func TestApproveRefusals(t *testing.T) {
	e := setup(t)
	for _, tc := range []struct {
		path, body, want string
		code             int
	}{
		{"/api/runs/r-1/approvals/req-1", `allow`, "an approval's answer: want {", 400},
		{"/api/runs/r-1/approvals/req-1", ``, "must be 1 to", 400},
		{"/api/runs/bad%20run/approvals/req-1", `{"allow":true}`, "runId", 400},
		{"/api/runs/r-1/approvals/req-1", `{"allow":true}`, "no worker answered", 503},
	} {
		if code, body := post(t, e.srv.URL+tc.path, tc.body); code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("POST %s %s: %d %s, want %d %q", tc.path, tc.body, code, body, tc.code, tc.want)
		}
	}
	var rep map[string]any
	if code := getStatus(t, e.srv.URL+"/api/runs/r-1/approvals", &rep); code != 503 {
		t.Errorf("GET approvals with no worker: %d %v", code, rep)
	}
	ro, err := console.New(t.Context(), e.js, names, console.WithToken(token), console.WithReadOnly())
	if err != nil {
		t.Fatal(err)
	}
	roSrv := httptest.NewServer(ro)
	t.Cleanup(roSrv.Close)
	if code, body := post(t, roSrv.URL+"/api/runs/r-1/approvals/req-1", `{"allow":true}`); code != 403 {
		t.Errorf("approve on a read-only console: %d %s", code, body)
	}
}
