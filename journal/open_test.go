package journal

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestOpenNoLinks: a run file reached through a symbolic link (the file
// or its directory), or one that is not a regular file, is refused for
// reading and for creating, and the link's target is left untouched.
func TestOpenNoLinks(t *testing.T) {
	root := t.TempDir()
	secret := filepath.Join(root, "secret")
	if err := os.WriteFile(secret, []byte("SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	run := filepath.Join(root, "run")
	if err := os.Mkdir(run, 0o700); err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(run, "plain"), []byte("ok"), 0o600))
	must(os.Symlink(secret, filepath.Join(run, "link")))
	must(os.Symlink("plain", filepath.Join(run, "inner-link")))
	must(os.Symlink(filepath.Join(root, "nowhere"), filepath.Join(run, "dangling")))
	must(os.Mkdir(filepath.Join(run, "dir"), 0o700))
	must(syscall.Mkfifo(filepath.Join(run, "fifo"), 0o600))
	must(os.Symlink(run, filepath.Join(root, "run-link")))

	for _, tc := range []struct {
		name string
		path string
		flag int
		want error // nil: opens
	}{
		{"plain file", filepath.Join(run, "plain"), os.O_RDONLY, nil},
		{"new file", filepath.Join(run, "new"), os.O_WRONLY | os.O_CREATE, nil},
		{"directory with O_DIRECTORY", filepath.Join(run, "dir"), os.O_RDONLY | syscall.O_DIRECTORY, nil},
		{"missing", filepath.Join(run, "missing"), os.O_RDONLY, fs.ErrNotExist},
		{"link out", filepath.Join(run, "link"), os.O_RDONLY, ErrNotPlain},
		{"link out, truncating", filepath.Join(run, "link"), os.O_WRONLY | os.O_CREATE | os.O_TRUNC, ErrNotPlain},
		{"link inside the directory", filepath.Join(run, "inner-link"), os.O_RDONLY, ErrNotPlain},
		{"dangling link, creating", filepath.Join(run, "dangling"), os.O_WRONLY | os.O_CREATE, ErrNotPlain},
		{"directory as a file", filepath.Join(run, "dir"), os.O_RDONLY, ErrNotPlain},
		{"fifo", filepath.Join(run, "fifo"), os.O_RDONLY, ErrNotPlain},
		{"run directory is a link", filepath.Join(root, "run-link", "plain"), os.O_RDONLY, ErrNotPlain},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := OpenNoLinks(tc.path, tc.flag, 0o600)
			if err == nil {
				f.Close()
			}
			switch {
			case tc.want == nil && err != nil:
				t.Fatalf("OpenNoLinks = %v, want it open", err)
			case tc.want != nil && !errors.Is(err, tc.want):
				t.Fatalf("OpenNoLinks = %v, want %v", err, tc.want)
			}
		})
	}
	if b, _ := os.ReadFile(secret); string(b) != "SECRET" {
		t.Fatalf("the link's target now holds %q", b)
	}
	if _, err := os.Lstat(filepath.Join(root, "nowhere")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a dangling link's target was created: %v", err)
	}
	for _, name := range []string{"", ".", "..", "a/b"} {
		if _, err := Dir(run).Open(name, os.O_RDONLY, 0); !errors.Is(err, ErrInvalid) {
			t.Errorf("Dir.Open(%q) = %v, want ErrInvalid", name, err)
		}
	}
}

// TestStderrTailFollowsNoLink: a stderr.log planted as a link to a secret
// file yields no tail, never the secret.
func TestStderrTailFollowsNoLink(t *testing.T) {
	root := t.TempDir()
	secret := filepath.Join(root, "secret")
	if err := os.WriteFile(secret, []byte("SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := Dir(filepath.Join(root, "run"))
	if err := os.Mkdir(string(dir), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, dir.Stderr()); err != nil {
		t.Fatal(err)
	}
	if got := StderrTail(dir, 100); got != "" {
		t.Fatalf("StderrTail = %q through a link", got)
	}
	if _, err := OpenWriter(dir.Stderr()); !errors.Is(err, ErrNotPlain) {
		t.Fatalf("OpenWriter through a link = %v, want ErrNotPlain", err)
	}
}
