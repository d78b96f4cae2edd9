package worker

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/batonhq/baton/internal/bounded"
	"github.com/batonhq/baton/internal/fstree"
	"github.com/batonhq/baton/outputs"
)

// errAlteredRepo: the workspace's repository cannot give the cloned
// commit's tree as git fetched it (its objects were changed, removed or
// redirected): the run gets no diff, and says why.
var errAlteredRepo = errors.New("the workspace's repository does not hold the cloned commit as it was fetched")

// maxGitEntries bounds the entries of a cloned commit's tree laid out as a
// baseline, as a capture bounds a workspace's.
const maxGitEntries = outputs.DefaultMaxEntries

// gitTree lays out into root the tree of commit (recorded where the
// agent cannot write: sandbox.ClonedCommit), read from the objects of the
// workspace's repository ws/.git. The agent had that repository, so
// nothing of it is trusted but its object ids: every object read is
// hashed here and must have the id it was asked for (git cat-file does
// not check), the tree is walked here (no git checkout, attributes,
// filters or hooks), and git runs in a repository of its own made for
// this, whose configuration and refs the agent never saw, borrowing only
// the workspace's object directory, which must be a directory with no
// alternates (objects elsewhere on the host). Size, entries and depth are
// bounded; a name git would not check out (.git, .., /) fails it.
func gitTree(ctx context.Context, ws, scratch, commit string, root *os.Root, maxBytes int64) error {
	objects := filepath.Join(ws, ".git", "objects")
	for _, p := range []string{filepath.Join(ws, ".git"), objects, filepath.Join(objects, "pack")} {
		if fi, err := os.Lstat(p); err != nil || !fi.IsDir() {
			return fmt.Errorf("%w: %s is not a directory", errAlteredRepo, strings.TrimPrefix(p, ws+"/"))
		}
	}
	if _, err := os.Lstat(filepath.Join(objects, "info", "alternates")); !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: it names other object directories (objects/info/alternates)", errAlteredRepo)
	}
	format, newHash := "sha1", sha1.New
	if len(commit) == 64 {
		format, newHash = "sha256", sha256.New
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=/nonexistent", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_NO_REPLACE_OBJECTS=1", "GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=core.hooksPath", "GIT_CONFIG_VALUE_0=/dev/null"}
	initCmd := exec.Command("git", "init", "-q", "--bare", "--object-format="+format, scratch)
	initCmd.Env = env
	if out, err := bounded.Output(ctx, seedTimeout, initCmd); err != nil {
		return fmt.Errorf("%w: %s", err, bytes.TrimSpace(out))
	}
	cmd := bounded.Command(ctx, "git", "cat-file", "--batch")
	cmd.Env = append(env, "GIT_DIR="+scratch, "GIT_OBJECT_DIRECTORY="+objects)
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	stderr := &bounded.Buffer{Limit: 4096}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() {
		in.Close()
		_ = cmd.Wait()
	}()
	t := &treeReader{in: in, out: bufio.NewReader(outPipe), newHash: newHash, left: maxBytes}
	body, err := t.read(commit, "commit")
	if err != nil {
		return err
	}
	tree, ok := commitTree(body)
	if !ok {
		return fmt.Errorf("%w: commit %s names no tree", errAlteredRepo, commit)
	}
	type dir struct{ id, rel string }
	stack, entries := []dir{{tree, ""}}, 0
	for len(stack) > 0 {
		d := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		body, err := t.read(d.id, "tree")
		if err != nil {
			return err
		}
		for len(body) > 0 {
			sp := bytes.IndexByte(body, ' ')
			nul := bytes.IndexByte(body, 0)
			size := t.newHash().Size()
			if sp < 0 || nul < sp || len(body) < nul+1+size {
				return fmt.Errorf("%w: tree %s is malformed", errAlteredRepo, d.id)
			}
			mode, name, id := string(body[:sp]), string(body[sp+1:nul]), hex.EncodeToString(body[nul+1:nul+1+size])
			body = body[nul+1+size:]
			if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") || strings.EqualFold(name, ".git") {
				return fmt.Errorf("%w: tree %s has an entry named %q", errAlteredRepo, d.id, name)
			}
			rel := path.Join(d.rel, name)
			if entries++; entries > maxGitEntries || strings.Count(rel, "/")+1 > fstree.DefaultMaxDepth {
				return fmt.Errorf("the commit's tree has more than %d entries or is deeper than %d directories", maxGitEntries, fstree.DefaultMaxDepth)
			}
			switch mode {
			case "40000":
				if err := root.Mkdir(rel, 0o755); err != nil {
					return err
				}
				stack = append(stack, dir{id, rel})
			case "100644", "100755":
				content, err := t.read(id, "blob")
				if err != nil {
					return err
				}
				perm := fs.FileMode(0o644)
				if mode == "100755" {
					perm = 0o755
				}
				if err := root.WriteFile(rel, content, perm); err != nil {
					return err
				}
			case "120000":
				target, err := t.read(id, "blob")
				if err != nil {
					return err
				}
				if err := root.Symlink(string(target), rel); err != nil {
					return err
				}
			case "160000":
				// A submodule is not cloned (no recursion): its directory
				// is empty in the workspace, and not in the baseline.
			default:
				return fmt.Errorf("%w: tree %s has an entry of mode %s", errAlteredRepo, d.id, mode)
			}
		}
	}
	return nil
}

// treeReader reads objects through one `git cat-file --batch`, checking
// each against its id, within a byte budget.
type treeReader struct {
	in      io.Writer
	out     *bufio.Reader
	newHash func() hash.Hash
	left    int64
}

func (t *treeReader) read(id, want string) ([]byte, error) {
	if _, err := io.WriteString(t.in, id+"\n"); err != nil {
		return nil, fmt.Errorf("read object %s: %w", id, err)
	}
	head, err := t.out.ReadString('\n')
	if err != nil {
		return nil, fmt.Errorf("read object %s: %w", id, err)
	}
	f := strings.Fields(head)
	if len(f) != 3 || f[0] != id {
		return nil, fmt.Errorf("%w: object %s: %s", errAlteredRepo, id, strings.TrimSpace(head))
	}
	size, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil || size < 0 {
		return nil, fmt.Errorf("%w: object %s: %s", errAlteredRepo, id, strings.TrimSpace(head))
	}
	if size > t.left {
		return nil, fmt.Errorf("%w: the cloned commit's tree is larger than the workspace's limit", outputs.ErrLimit)
	}
	t.left -= size
	body := make([]byte, size+1)
	if _, err := io.ReadFull(t.out, body); err != nil {
		return nil, fmt.Errorf("read object %s: %w", id, err)
	}
	body = body[:size]
	h := t.newHash()
	fmt.Fprintf(h, "%s %d\x00", f[1], size)
	h.Write(body)
	if hex.EncodeToString(h.Sum(nil)) != id || f[1] != want {
		return nil, fmt.Errorf("%w: object %s is not the %s it was fetched as", errAlteredRepo, id, want)
	}
	return body, nil
}

// commitTree is the tree a commit object names on its first line.
func commitTree(body []byte) (string, bool) {
	line, _, _ := bytes.Cut(body, []byte("\n"))
	id, ok := bytes.CutPrefix(line, []byte("tree "))
	return string(id), ok && (len(id) == 40 || len(id) == 64)
}
