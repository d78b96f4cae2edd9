package protocol

import "testing"

// An egress message's subject is one of the run's: a successor aligns
// from it as from any other message of the chain.
func TestParseEgressSubject(t *testing.T) {
	n := MustNames("acme")
	id, kind, ok := n.ParseRunSubject(n.EgressSubject("run-1"))
	if !ok || id != "run-1" || kind != KindEgress {
		t.Fatalf("ParseRunSubject(%q) = %q, %q, %v", n.EgressSubject("run-1"), id, kind, ok)
	}
	if n.IngestSubject("run-1", KindEgress) != "acme.ingest.run-1.egress" {
		t.Fatalf("ingest subject %q", n.IngestSubject("run-1", KindEgress))
	}
}
