package client

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/nats-io/nats.go/jetstream"
)

// PutWorkspace stores the archive r (a tar, or a gzipped tar) in the
// workspaces bucket and returns its name, for a job's Workspace:
// "sha256-<hex>.tar.gz" (".tar" when it is not gzipped), named by its
// content, so uploading the same archive again stores nothing. r is
// spooled to a temporary file first: the name is known only at its end.
func (c *Client) PutWorkspace(ctx context.Context, r io.Reader) (string, error) {
	tmp, err := os.CreateTemp("", "baton-workspace-*")
	if err != nil {
		return "", fmt.Errorf("put workspace: %w", err)
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	sum := sha256.New()
	br := bufio.NewReader(r)
	magic, _ := br.Peek(2)
	ext := ".tar"
	if len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		ext = ".tar.gz"
	}
	if _, err := io.Copy(io.MultiWriter(tmp, sum), br); err != nil {
		return "", fmt.Errorf("put workspace: %w", err)
	}
	digest := sum.Sum(nil)
	name := "sha256-" + hex.EncodeToString(digest) + ext
	bucket := c.names.WorkspacesBucket()
	obs, err := c.js.ObjectStore(ctx, bucket)
	if err != nil {
		return "", fmt.Errorf("put workspace: %w", hintNoStream(err, bucket))
	}
	want := "SHA-256=" + base64.URLEncoding.EncodeToString(digest)
	if info, err := obs.GetInfo(ctx, name); err == nil && info.Digest == want {
		return name, nil // stored before
	} else if err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		return "", fmt.Errorf("put workspace %s: %w", name, err)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return "", fmt.Errorf("put workspace: %w", err)
	}
	if _, err := obs.Put(ctx, jetstream.ObjectMeta{Name: name, Description: "baton workspace archive"}, tmp); err != nil {
		return "", fmt.Errorf("put workspace %s: %w", name, err)
	}
	return name, nil
}

// PutWorkspaceDir stores dir as a gzipped tar with PutWorkspace: its
// files, directories and symbolic links (recorded as links, never
// followed), without sockets, devices and FIFOs, which a workspace
// archive may not hold.
func (c *Client) PutWorkspaceDir(ctx context.Context, dir string) (string, error) {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(TarDir(pw, dir)) }()
	name, err := c.PutWorkspace(ctx, pr)
	pr.CloseWithError(io.ErrClosedPipe) // unblocks TarDir if the put failed
	return name, err
}

// TarDir writes dir as a gzipped tar to w, in path order, with the names
// relative to dir: what PutWorkspaceDir uploads.
func TarDir(w io.Writer, dir string) error {
	zw := gzip.NewWriter(w)
	tw := tar.NewWriter(zw)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		if d.Type()&(fs.ModeSocket|fs.ModeDevice|fs.ModeCharDevice|fs.ModeNamedPipe) != 0 {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		hdr, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if fi.IsDir() {
			hdr.Name += "/"
		}
		// Whose the files were here means nothing on a worker.
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, io.LimitReader(f, fi.Size()))
		return err
	})
	if err != nil {
		return fmt.Errorf("tar %s: %w", dir, err)
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}
