package protocol_test

import (
	"strings"
	"testing"

	"github.com/batonhq/baton/protocol"
)

func TestReplyAllowed(t *testing.T) {
	long := strings.Repeat("a", 128)
	cases := []struct {
		reply, run string
		want       bool
	}{
		{"_INBOX.abc", "", true},
		{"_INBOX.abc.7", "r1", true},
		{"_INBOX_run.r1.abc.1", "r1", true},
		{"_INBOX_run." + long + ".x", long, true},
		{"", "r1", false},
		{"_INBOX", "r1", false},
		{"_INBOX.", "r1", false},
		{"_INBOX..x", "r1", false},
		{"_INBOX.*", "r1", false},
		{"_INBOX.>", "r1", false},
		{"_INBOX.a b", "r1", false},
		{"_INBOX_run.r2.abc", "r1", false},  // another run's token inbox
		{"_INBOX_run.r1.abc", "", false},    // no run: no token inbox
		{"_INBOX_run.r1", "r1", false},      // the prefix itself
		{"_INBOX_run.r1x.abc", "r1", false}, // a longer id is another run
		{"_INBOX_baton_worker.abc", "r1", false},
		{"_INBOX_baton_worker.abc", "baton_worker", false},
		{"$JS.API.STREAM.DELETE.BATON_EVENTS", "r1", false},
		{"$KV.BATON_RUNS.r1", "r1", false},
		{"$O.BATON_WORKSPACES.M.x", "r1", false},
		{"baton.ingest.r1.status", "r1", false},
		{"baton.runs.r1.events", "r1", false},
		{"_INBOX." + strings.Repeat("a", protocol.MaxReplyLen), "r1", false},
	}
	for _, c := range cases {
		if got := protocol.ReplyAllowed(c.reply, c.run); got != c.want {
			t.Errorf("ReplyAllowed(%q, %q) = %v, want %v", c.reply, c.run, got, c.want)
		}
	}
}

// TestInboxNamespacesDisjoint: over the run-id grammar's edge cases, no run
// token's inbox namespace overlaps the clients', the workers' or another
// run's: the first token of each differs, or, for two runs, the second.
func TestInboxNamespacesDisjoint(t *testing.T) {
	ids := []string{"baton_worker", "worker", "console", "client", "INBOX", "_INBOX", "_", "-", "run",
		"a", "a-", "a_", strings.Repeat("z", 128), strings.Repeat("_", 128)}
	for _, id := range ids {
		if !protocol.ValidRunID(id) {
			t.Fatalf("%q is not a valid run id; the table is wrong", id)
		}
	}
	others := []string{protocol.ClientInboxPrefix, protocol.WorkerInboxPrefix}
	for _, id := range ids {
		p := protocol.RunInboxPrefix(id) + "."
		for _, o := range others {
			if strings.HasPrefix(p, o+".") || strings.HasPrefix(o+".", p) {
				t.Errorf("run %q's inbox %q overlaps %q", id, p, o)
			}
		}
		for _, id2 := range ids {
			q := protocol.RunInboxPrefix(id2) + "."
			if id != id2 && (strings.HasPrefix(p, q) || strings.HasPrefix(q, p)) {
				t.Errorf("run %q's inbox %q overlaps run %q's %q", id, p, id2, q)
			}
		}
		if protocol.ReplyAllowed(protocol.WorkerInboxPrefix+".x", id) {
			t.Errorf("a request about run %q may be answered into the workers' inbox", id)
		}
	}
}

// FuzzReplyAllowed: a reply subject ReplyAllowed accepts, from any
// requester, is always inside the client namespace or that run's token
// namespace, a literal subject (no wildcard, no empty token) of bounded
// length: never the workers' inbox, another run's, or anything with
// rights behind it ($JS, $KV, $O, a run's chain).
func FuzzReplyAllowed(f *testing.F) {
	for _, s := range []string{"_INBOX.abc", "_INBOX_run.r1.abc", "_INBOX_baton_worker.x", "$JS.API.STREAM.DELETE.X", "_INBOX.>", ""} {
		f.Add(s, "r1")
	}
	f.Fuzz(func(t *testing.T, reply, run string) {
		if !protocol.ReplyAllowed(reply, run) {
			return
		}
		inRun := run != "" && strings.HasPrefix(reply, protocol.RunInboxPrefix(run)+".")
		if !strings.HasPrefix(reply, protocol.ClientInboxPrefix+".") && !inRun {
			t.Fatalf("ReplyAllowed(%q, %q): outside the client's and the run's inbox", reply, run)
		}
		if len(reply) > protocol.MaxReplyLen || strings.ContainsAny(reply, "*> \t\r\n") ||
			strings.Contains(reply, "..") || strings.HasSuffix(reply, ".") {
			t.Fatalf("ReplyAllowed(%q, %q): not a bounded literal subject", reply, run)
		}
	})
}
