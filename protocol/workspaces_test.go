package protocol_test

import (
	"crypto/sha256"
	"strconv"
	"strings"
	"testing"

	"github.com/batonhq/baton/protocol"
)

func TestParseWorkspaceSize(t *testing.T) {
	for _, c := range []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"0", 0, true},
		{"1", 1, true},
		{"262154", 262154, true},
		{"9223372036854775807", 1<<63 - 1, true},
		{"9223372036854775808", 0, false}, // past int64: no file is that large
		{"", 0, false},
		{"01", 0, false},
		{"-1", 0, false},
		{"+1", 0, false},
		{" 1", 0, false},
		{"1\n", 0, false},
		{"1e3", 0, false},
		{"0x10", 0, false},
		{strings.Repeat("1", 20), 0, false},
	} {
		got, ok := protocol.ParseWorkspaceSize([]byte(c.in))
		if got != c.want || ok != c.ok {
			t.Errorf("ParseWorkspaceSize(%q) = %d, %v; want %d, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func FuzzParseWorkspaceSize(f *testing.F) {
	for _, s := range []string{"0", "262154", "01", "-1", "9223372036854775808"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n, ok := protocol.ParseWorkspaceSize(b)
		if ok && strconv.FormatUint(n, 10) != string(b) {
			t.Fatalf("%q read as %d, which prints otherwise", b, n)
		}
	})
}

func TestWorkspaceNames(t *testing.T) {
	sum := sha256.Sum256([]byte("archive"))
	names := protocol.MustNames("")
	hex := "a2cd0ce5b0bb6a4e1ea7b6c89c56e4fdc2e2b3f3cd0b5b7a7f1bfc76d8a4a6ac"
	for _, c := range []struct {
		name, digest string
		ok           bool
	}{
		{protocol.WorkspaceObjectName(sum, true), "", true},
		{protocol.WorkspaceObjectName(sum, false), "", true},
		{"sha256-" + hex + ".tar.gz", hex, true},
		{"sha256-" + hex + ".tar", hex, true},
		{"sha256-" + hex + ".zip", "", false},
		{"sha256-" + strings.ToUpper(hex) + ".tar", "", false}, // one spelling per digest
		{"sha256-" + hex[1:] + ".tar", "", false},
		{"sha256-" + hex + "0.tar", "", false},
		{"sha256-" + hex + ".tar.gz.tar", "", false},
		{"repo.tar.gz", "", false},
		{"sha256-*.tar", "", false},
		{"", "", false},
	} {
		d, ok := protocol.WorkspaceDigest(c.name)
		if ok != c.ok || (c.digest != "" && d != c.digest) {
			t.Errorf("WorkspaceDigest(%q) = %q, %v; want %q, %v", c.name, d, ok, c.digest, c.ok)
		}
		if ok && (strings.ContainsAny(names.WorkspaceSizeSubject(d), "*> ") || len(d) != 64) {
			t.Errorf("%q makes the subject %q", c.name, names.WorkspaceSizeSubject(d))
		}
	}
	if got := names.WorkspaceChunkSubject(hex, 7); got != "baton.workspaces."+hex+".7" {
		t.Errorf("chunk subject %q", got)
	}
	for size, want := range map[uint64]int{0: 0, 1: 1, protocol.WorkspaceChunkBytes: 1, protocol.WorkspaceChunkBytes + 1: 2} {
		if got := protocol.WorkspaceChunks(size); got != want {
			t.Errorf("WorkspaceChunks(%d) = %d, want %d", size, got, want)
		}
	}
}
