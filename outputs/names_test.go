package outputs_test

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/batonhq/baton/outputs"
	"github.com/batonhq/baton/protocol"
)

func TestEscapePath(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"out/report.md", "out/report.md"},
		{"résumé.txt", "résumé.txt"},
		{"a\nb", "a%0Ab"},
		{"100%", "100%25"},
		{"bad\xff\xfe", "bad%FF%FE"},
		{"tab\there", "tab%09here"},
		{"\u200b", "%E2%80%8B"}, // zero width space: not printable
	} {
		got := outputs.EscapePath(tc.in)
		if got != tc.want {
			t.Errorf("EscapePath(%q) = %q, want %q", tc.in, got, tc.want)
		}
		back, err := outputs.UnescapePath(got)
		if err != nil || back != tc.in {
			t.Errorf("UnescapePath(%q) = %q, %v", got, back, err)
		}
	}
}

func TestUnescapePathMalformed(t *testing.T) {
	for _, in := range []string{"%", "a%4", "%zz", "%0g", "x%"} {
		if _, err := outputs.UnescapePath(in); !errors.Is(err, outputs.ErrBadName) {
			t.Errorf("UnescapePath(%q): %v, want ErrBadName", in, err)
		}
	}
}

func TestSplitOutput(t *testing.T) {
	long := strings.Repeat(strings.Repeat("d", 250)+"/", 15) + "f"
	for _, tc := range []struct {
		o         protocol.Output
		kind, rel string
		bad       bool
	}{
		{o: protocol.Output{Name: "r1/diff.patch"}, kind: outputs.KindDiff},
		{o: protocol.Output{Name: outputs.FileName("r1", "out/a\nb"), Path: "out/a%0Ab"}, kind: outputs.KindFile, rel: "out/a\nb"},
		{o: protocol.Output{Name: outputs.FileName("r1", long), Path: long}, kind: outputs.KindFile, rel: long},
		// Listed before names were digests.
		{o: protocol.Output{Name: "r1/files/out/a%0Ab"}, kind: outputs.KindFile, rel: "out/a\nb"},
		// A path that is not the one named.
		{o: protocol.Output{Name: outputs.FileName("r1", "out/a"), Path: "../../etc/passwd"}, bad: true},
		{o: protocol.Output{Name: outputs.FileName("r1", "out/a"), Path: "%"}, bad: true},
		{o: protocol.Output{Name: "r2/diff.patch"}, bad: true},
		{o: protocol.Output{Name: "r1/files/"}, bad: true},
		{o: protocol.Output{Name: "r1/files/%"}, bad: true},
		{o: protocol.Output{Name: "r1/other"}, bad: true},
	} {
		kind, rel, err := outputs.SplitOutput("r1", tc.o)
		if tc.bad {
			if !errors.Is(err, outputs.ErrBadName) {
				t.Errorf("SplitOutput(%+v): %v, want ErrBadName", tc.o, err)
			}
			continue
		}
		if err != nil || kind != tc.kind || rel != tc.rel {
			t.Errorf("SplitOutput(%+v) = %q, %q, %v", tc.o, kind, rel, err)
		}
	}
	// No path makes a name longer than the digest's.
	if n := outputs.FileName("r1", long); len(n) != len("r1/files/")+64 {
		t.Errorf("FileName of a %d-byte path is %d bytes", len(long), len(n))
	}
}

func TestGlobs(t *testing.T) {
	for _, tc := range []struct {
		pattern, name string
		want          bool
	}{
		{"out/**", "out/a", true},
		{"out/**", "out/a/b/c.txt", true},
		{"out/**", "outx/a", false},
		{"**/*.md", "README.md", true},
		{"**/*.md", "docs/x/y.md", true},
		{"*.md", "docs/y.md", false},
		{"report.txt", "report.txt", true},
		{"a/**/b", "a/b", true},
		{"a/**/b", "a/x/y/b", true},
		{"a/**/b", "a/x/y/c", false},
		{"?.go", "a.go", true},
		{"[ab].go", "c.go", false},
	} {
		if err := outputs.CheckGlob(tc.pattern); err != nil {
			t.Fatalf("CheckGlob(%q): %v", tc.pattern, err)
		}
		if got := outputs.Match(tc.pattern, tc.name); got != tc.want {
			t.Errorf("Match(%q, %q) = %v", tc.pattern, tc.name, got)
		}
	}
	for _, bad := range []string{"", "/abs", "a//b", "../x", "a/./b", "a**", "[", "**/**/**/**/x", strings.Repeat("a", 300)} {
		if err := outputs.CheckGlob(bad); !errors.Is(err, outputs.ErrBadGlob) {
			t.Errorf("CheckGlob(%q): %v, want ErrBadGlob", bad, err)
		}
	}
}

func FuzzEscapePath(f *testing.F) {
	for _, s := range []string{"a", "a\nb", "%", "\xff", "out/ré.txt"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		esc := outputs.EscapePath(p)
		if !utf8.ValidString(esc) || strings.ContainsAny(esc, "\n\r\x00") {
			t.Fatalf("EscapePath(%q) = %q is not safe", p, esc)
		}
		back, err := outputs.UnescapePath(esc)
		if err != nil || back != p {
			t.Fatalf("round trip of %q: %q, %v", p, back, err)
		}
		_, _ = outputs.UnescapePath(p) // never panics
	})
}

func FuzzGlob(f *testing.F) {
	for _, s := range []string{"out/**", "**/*.md", "[", "a/**/b/**/c"} {
		f.Add(s, "a/b/c")
	}
	f.Fuzz(func(t *testing.T, pattern, name string) {
		if outputs.CheckGlob(pattern) != nil {
			return
		}
		_ = outputs.Match(pattern, name) // never panics, ends quickly
	})
}

// FuzzSplitOutput: whatever a status lists, a file's path is given back
// only when the name is its digest, and it never names the run's diff.
func FuzzSplitOutput(f *testing.F) {
	f.Add("r1/diff.patch", "")
	f.Add(outputs.FileName("r1", "out/a"), "out/a")
	f.Add("r1/files/out%2F..%2Fx", "")
	f.Add(outputs.FileName("r1", "a"), "%")
	f.Fuzz(func(t *testing.T, name, path string) {
		kind, rel, err := outputs.SplitOutput("r1", protocol.Output{Name: name, Path: path})
		if err != nil {
			return
		}
		switch kind {
		case outputs.KindDiff:
			if name != "r1/diff.patch" || rel != "" {
				t.Fatalf("%q, %q: diff with %q", name, path, rel)
			}
		case outputs.KindFile:
			if path != "" && outputs.FileName("r1", rel) != name {
				t.Fatalf("%q, %q: path %q is not the one named", name, path, rel)
			}
		default:
			t.Fatalf("kind %q", kind)
		}
	})
}
