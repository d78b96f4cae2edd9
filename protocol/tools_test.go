package protocol_test

import (
	"testing"

	"github.com/batonhq/baton/protocol"
)

func TestToolNames(t *testing.T) {
	n := protocol.MustNames("acme")
	if got := n.ToolSubject("create_pr"); got != "acme.tools.create_pr" {
		t.Errorf("ToolSubject = %q", got)
	}
	if got := n.ToolSubjects(); got != "acme.tools.>" {
		t.Errorf("ToolSubjects = %q", got)
	}
	for subject, want := range map[string]bool{"acme.runs.r1.tool": true, "acme.runs.r1.tools": false, "acme.tools.r1": false} {
		id, kind, ok := n.ParseRunSubject(subject)
		if ok != want || (ok && (id != "r1" || kind != protocol.KindTool)) {
			t.Errorf("ParseRunSubject(%q) = %q, %q, %v", subject, id, kind, ok)
		}
	}
}
