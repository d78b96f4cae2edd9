package stage

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestTargetStaysInTheRoot: a mount point, the directories made for it and
// a link's parent are resolved inside the root being built. Through an
// absolute link (as /etc's copies of the host's may be) or a relative one
// climbing out, nothing is made or opened on the host: the link resolves
// to the root's own path, made if it exists there and refused if not. The
// MkdirAll this replaced made the host's outside/ssl/certs.
func TestTargetStaysInTheRoot(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	root := rootDir(dir)
	in := func(p string) string { return filepath.Join(dir, p) }
	for name, to := range map[string]string{"abs": outside, "up": "../../../../../../.." + outside} {
		if err := os.Symlink(to, in(name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"abs/ssl/certs", "up/etc/hosts"} {
		if mp, err := root.target(in(p), false); err == nil {
			mp.close()
			t.Errorf("target %s: made, through a link whose target the root lacks", p)
		}
	}
	if err := root.symlink("/usr/share/zoneinfo/UTC", in("abs/zone/localtime")); err == nil {
		t.Error("symlink through a link whose target the root lacks: made")
	}
	if ents, err := os.ReadDir(outside); err != nil || len(ents) != 0 {
		t.Fatalf("the host directory the links name holds %v (%v): made through a link", ents, err)
	}

	// Once the root has the link's target, the link leads there.
	if err := os.MkdirAll(in(outside), 0o755); err != nil {
		t.Fatal(err)
	}
	mp, err := root.target(in("abs/ssl/certs"), true)
	if err != nil {
		t.Fatal(err)
	}
	defer mp.close()
	var got, want unix.Stat_t
	if err := unix.Fstat(mp.fd, &got); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat(in(filepath.Join(outside, "ssl/certs")), &want); err != nil || got.Ino != want.Ino {
		t.Fatalf("abs/ssl/certs is not the root's %s/ssl/certs (%v)", outside, err)
	}
	if _, err := os.Stat(filepath.Join(outside, "ssl")); !os.IsNotExist(err) {
		t.Fatalf("the host's %s/ssl: %v, want none", outside, err)
	}
	if _, err := root.target("/etc/passwd", false); err == nil {
		t.Fatal("a path outside the root was taken")
	}
}
