package checkpoint

import (
	"errors"
	"maps"
	"strings"
	"testing"
	"time"
)

func man(object string, chain []string, entries, deleted []string) *Manifest {
	return &Manifest{Version: version, Object: object, Session: "s", Run: "r", Chain: chain, Entries: entries, Deleted: deleted, Created: time.Unix(1, 0)}
}

func TestPlanOf(t *testing.T) {
	base := man("s/r1", []string{"s/r1"}, []string{"workspace/a", "workspace/d", "workspace/d/f", "home/.x"}, nil)
	d1 := man("s/r2", []string{"s/r1", "s/r2"}, []string{"workspace/a", "workspace/n"}, []string{"workspace/d/f"})
	// d became a file, its child gone; n deleted then a link again.
	d2 := man("s/r3", []string{"s/r1", "s/r2", "s/r3"}, []string{"workspace/d"}, []string{"workspace/n"})
	d3 := man("s/r4", []string{"s/r1", "s/r2", "s/r3", "s/r4"}, []string{"workspace/n"}, nil)
	other := man("t/r2", []string{"s/r1", "t/r2"}, nil, nil)
	for _, tc := range []struct {
		name  string
		chain []*Manifest
		want  plan
		err   string
	}{
		{"base", []*Manifest{base}, plan{"workspace/a": 0, "workspace/d": 0, "workspace/d/f": 0, "home/.x": 0}, ""},
		{"a delta", []*Manifest{base, d1}, plan{"workspace/a": 1, "workspace/d": 0, "workspace/n": 1, "home/.x": 0}, ""},
		{"three deltas", []*Manifest{base, d1, d2, d3}, plan{"workspace/a": 1, "workspace/d": 2, "workspace/n": 3, "home/.x": 0}, ""},
		{"a manifest short", []*Manifest{base, d2}, nil, "chain has 3 objects, 2 manifests"},
		{"another chain", []*Manifest{d1, other}, nil, "is not the chain's object 1"},
		{"out of order", []*Manifest{d1, base}, nil, "chain has 1 objects, 2 manifests"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := planOf(tc.chain)
			if tc.err != "" {
				if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, want ErrCorrupt with %q", err, tc.err)
				}
				return
			}
			if err != nil || !maps.Equal(got, tc.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestNeedBase(t *testing.T) {
	chain := func(n int, bytes int64) *Manifest {
		m := &Manifest{ChainBytes: bytes}
		for i := range n {
			m.Chain = append(m.Chain, "s/r"+string(rune('a'+i)))
		}
		return m
	}
	for _, tc := range []struct {
		name        string
		parent      *Manifest
		delta, tree int64
		want        bool
	}{
		{"no parent", nil, 0, 100, true},
		{"a small change", chain(1, 200<<20), 4 << 10, 200 << 20, false},
		{"a chain at its bound", chain(MaxChain, 200<<20), 1, 200 << 20, true},
		{"one short of it", chain(MaxChain-1, 200<<20), 1, 200 << 20, false},
		{"rewrites pile up", chain(3, 390<<20), 20 << 20, 200 << 20, true},
		{"a tree that shrank", chain(2, 300<<20), 0, 100 << 20, true},
		{"an empty tree", chain(2, 0), 0, 0, false},
	} {
		if got := needBase(tc.parent, tc.delta, tc.tree); got != tc.want {
			t.Errorf("%s: needBase = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestChanges(t *testing.T) {
	f := func(size, mtime, ctime int64, ino uint64) Entry {
		return Entry{Kind: KindFile, Mode: 0o644, Size: size, Mtime: mtime, Ctime: ctime, Ino: ino}
	}
	prev := &Index{
		Paths: []string{"workspace/d", "workspace/d/a", "workspace/b", "workspace/l", "home/x", "workspace/gone"},
		Entries: map[string]Entry{
			"workspace/d": {Kind: KindDir, Mode: 0o755}, "workspace/d/a": f(1, 1, 1, 1), "workspace/b": f(2, 2, 2, 2),
			"workspace/l": {Kind: KindLink, Mode: 0o777, Target: "a"}, "home/x": f(3, 3, 3, 3), "workspace/gone": f(9, 9, 9, 9),
		},
	}
	cur := &Index{
		Paths: []string{"workspace/d", "workspace/d/a", "workspace/b", "workspace/l", "home/x", "workspace/new"},
		Entries: map[string]Entry{
			"workspace/d":   {Kind: KindDir, Mode: 0o755},
			"workspace/d/a": f(1, 1, 5, 1), // rewritten in place, same size and mtime: the ctime says so
			"workspace/b":   f(2, 2, 2, 2),
			"workspace/l":   {Kind: KindLink, Mode: 0o777, Target: "b"},
			"home/x":        f(3, 3, 3, 7), // replaced by a rename
			"workspace/new": f(100, 1, 1, 8),
		},
	}
	changed, bytes, deleted := changes(prev, cur)
	if want := []string{"workspace/d/a", "workspace/l", "home/x", "workspace/new"}; strings.Join(changed, " ") != strings.Join(want, " ") {
		t.Errorf("changed %q, want %q", changed, want)
	}
	if bytes != 1+3+100 {
		t.Errorf("changed bytes %d, want 104", bytes)
	}
	if strings.Join(deleted, " ") != "workspace/gone" {
		t.Errorf("deleted %q", deleted)
	}
}

func TestUnmarshalManifestRefuses(t *testing.T) {
	good := man("s/r2", []string{"s/r1", "s/r2"}, []string{"workspace/a"}, []string{"home/b"})
	for _, tc := range []struct {
		name string
		edit func(m *Manifest)
		msg  string
	}{
		{"version", func(m *Manifest) { m.Version = 2 }, "version 2"},
		{"object", func(m *Manifest) { m.Object = "../x" }, "not a checkpoint's"},
		{"chain end", func(m *Manifest) { m.Chain = []string{"s/r2", "s/r1"} }, "does not end with it"},
		{"empty chain", func(m *Manifest) { m.Chain = nil }, "chain of 0 objects"},
		{"long chain", func(m *Manifest) {
			m.Chain = nil
			for i := range MaxChain + 1 {
				m.Chain = append(m.Chain, "s/r"+string(rune('a'+i)))
			}
			m.Object = m.Chain[MaxChain]
		}, "at most 8"},
		{"chain twice", func(m *Manifest) { m.Chain = []string{"s/r2", "s/r2"} }, "listed twice"},
		{"bad chain name", func(m *Manifest) { m.Chain = []string{"s r1", "s/r2"} }, "not a checkpoint's"},
		{"no root", func(m *Manifest) { m.Entries = []string{"etc/passwd"} }, "under no root"},
		{"climbs", func(m *Manifest) { m.Entries = []string{"workspace/../x"} }, "not a clean name"},
		{"root itself", func(m *Manifest) { m.Deleted = []string{"home/"} }, "not a clean name"},
		{"negative", func(m *Manifest) { m.Bytes = -1 }, "negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := *good
			m.Chain = append([]string(nil), good.Chain...)
			tc.edit(&m)
			b, err := MarshalManifest(&m)
			if err != nil {
				t.Fatal(err)
			}
			_, err = UnmarshalManifest(b)
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("got %v, want ErrCorrupt with %q", err, tc.msg)
			}
		})
	}
	b, _ := MarshalManifest(good)
	if _, err := UnmarshalManifest(append(b, 0)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("trailing byte: %v", err)
	}
	if m, err := UnmarshalManifest(b); err != nil || m.Object != "s/r2" || m.Full() {
		t.Errorf("good manifest: %+v, %v", m, err)
	}
}

func TestUnmarshalIndexRefuses(t *testing.T) {
	good := &Index{Paths: []string{"workspace/a"}, Entries: map[string]Entry{"workspace/a": {Kind: KindFile}}}
	for _, tc := range []struct {
		name string
		x    *Index
		msg  string
	}{
		{"missing entry", &Index{Paths: []string{"workspace/a", "workspace/b"}, Entries: map[string]Entry{"workspace/a": {Kind: KindFile}, "workspace/c": {Kind: KindFile}}}, "has no entry"},
		{"count", &Index{Paths: []string{"workspace/a", "workspace/a"}, Entries: map[string]Entry{"workspace/a": {Kind: KindFile}}}, "2 paths and 1 entries"},
		{"kind", &Index{Paths: []string{"workspace/a"}, Entries: map[string]Entry{"workspace/a": {Kind: 'x'}}}, "kind"},
		{"path", &Index{Paths: []string{"tmp/a"}, Entries: map[string]Entry{"tmp/a": {Kind: KindFile}}}, "under no root"},
	} {
		b, _ := MarshalIndex(tc.x)
		if _, err := UnmarshalIndex(b); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: got %v, want ErrCorrupt with %q", tc.name, err, tc.msg)
		}
	}
	b, _ := MarshalIndex(good)
	if x, err := UnmarshalIndex(b); err != nil || len(x.Paths) != 1 {
		t.Errorf("good index: %+v, %v", x, err)
	}
	if _, err := UnmarshalIndex([]byte{0xc1}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("not msgpack: %v", err)
	}
}

func TestValidObject(t *testing.T) {
	for o, want := range map[string]bool{
		"s/r": true, "s-1/run_2": true, "s/r.setup": true, Name("a", "b"): true, SetupName("a", "b"): true,
		"s": false, "s/": false, "/r": false, "s/r/x": false, "s/r.other": false, "s/../r": false, "s r/x": false,
		strings.Repeat("s", 129) + "/r": false,
	} {
		if got := ValidObject(o); got != want {
			t.Errorf("ValidObject(%q) = %v, want %v", o, got, want)
		}
	}
	if SessionOf("s1/r.setup") != "s1" {
		t.Error("SessionOf")
	}
}

func FuzzUnmarshalManifest(f *testing.F) {
	b, _ := MarshalManifest(man("s/r2", []string{"s/r1", "s/r2"}, []string{"workspace/a"}, []string{"home/b"}))
	f.Add(b)
	f.Add([]byte{0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := UnmarshalManifest(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		// What it accepts is one chain's head, with paths a restore may
		// write.
		if m.Chain[len(m.Chain)-1] != m.Object {
			t.Fatalf("accepted %+v", m)
		}
		for _, p := range append(m.Entries, m.Deleted...) {
			if err := checkPath(p); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func FuzzUnmarshalIndex(f *testing.F) {
	b, _ := MarshalIndex(&Index{Paths: []string{"workspace/a", "home/b"}, Entries: map[string]Entry{"workspace/a": {Kind: KindFile, Size: 3}, "home/b": {Kind: KindLink, Target: "/x"}}})
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		x, err := UnmarshalIndex(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		for _, p := range x.Paths {
			if _, ok := x.Entries[p]; !ok || checkPath(p) != nil {
				t.Fatalf("accepted path %q", p)
			}
		}
		changes(x, x) // any accepted index diffs against itself
	})
}
