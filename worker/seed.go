package worker

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"

	"github.com/batonhq/baton/internal/unpack"
	"github.com/batonhq/baton/internal/wsarchive"
	"github.com/batonhq/baton/outputs"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/sandbox"
)

// seedTimeout bounds the extraction of a workspace archive: 1 GiB of
// files takes a minute or two on a slow disk.
const seedTimeout = 10 * time.Minute

// archiveError is a workspace archive that cannot seed its run; its
// message names the archive and what is wrong with it.
type archiveError struct {
	object string
	err    error
}

func (e *archiveError) Error() string {
	return fmt.Sprintf("workspace archive %q: %v", e.object, e.err)
}
func (e *archiveError) Unwrap() error { return e.err }

// pinWorkspace looks up the archive job names before its run exists and
// pins it by its digest, which its name says. An archive missing or over
// maxWorkspaceBytes is the job's fault, and the error wraps a job sentinel
// (the job goes to the DLQ); any other error is NATS's (the job is tried
// again).
func (w *Worker) pinWorkspace(ctx context.Context, job protocol.Job) (*sandbox.WorkspaceArchive, error) {
	if job.Workspace == nil || job.Workspace.Git != nil {
		return nil, nil
	}
	name := job.Workspace.Object
	digest, ok := protocol.WorkspaceDigest(name)
	if !ok {
		return nil, fmt.Errorf("%w: workspace archive %q is not in the bucket %s: archives are stored by their content and named sha256-<its SHA-256 in hex>.tar or .tar.gz (upload it with baton submit --workspace, or client.PutWorkspace)",
			protocol.ErrInvalidJob, name, w.names.WorkspacesStream())
	}
	size, err := wsarchive.Size(ctx, w.workspaces, w.names, digest)
	if errors.Is(err, wsarchive.ErrNotStored) {
		return nil, fmt.Errorf("%w: workspace archive %q is not in the bucket %s (upload it with baton submit --workspace, or client.PutWorkspace)",
			protocol.ErrInvalidJob, name, w.names.WorkspacesStream())
	}
	if errors.Is(err, wsarchive.ErrBadChunk) {
		return nil, fmt.Errorf("%w: workspace archive %q: %v", protocol.ErrInvalidJob, name, err)
	}
	if err != nil {
		return nil, fmt.Errorf("look up workspace archive %q: %w", name, err)
	}
	if max := w.cfg.WorkspaceLimits().MaxBytes; size > uint64(max) {
		return nil, fmt.Errorf("%w: workspace archive %q is %d bytes, more than maxWorkspaceBytes (%d)", protocol.ErrOversize, name, size, max)
	}
	return &sandbox.WorkspaceArchive{Object: name, Digest: protocol.WorkspaceDigestHeader(digest), Size: size}, nil
}

// seedWorkspace is the sandbox.SeedFunc of a run seeded from the archive
// object, pinned as arch (nil when pinning failed with pinErr): it
// extracts the archive into the new workspace, giving it to the sandbox
// ids, and keeps the job from being redelivered meanwhile (a large
// archive may take longer than AckWait).
func (w *Worker) seedWorkspace(object string, arch *sandbox.WorkspaceArchive, pinErr error, inProgress func() error, log zerolog.Logger) sandbox.SeedFunc {
	return func(ctx context.Context, ws, _ *os.Root, uid, gid int) error {
		if arch == nil {
			return &archiveError{object, pinErr}
		}
		tick := time.NewTicker(max(w.ackWait/3, time.Second))
		defer tick.Stop()
		done := make(chan struct{})
		defer close(done)
		go func() {
			for {
				select {
				case <-tick.C:
					_ = inProgress()
				case <-done:
					return
				}
			}
		}()
		start := time.Now()
		sctx, cancel := context.WithTimeout(ctx, seedTimeout)
		defer cancel()
		st, err := w.extractArchive(sctx, arch, ws, unpack.Options{Limits: w.cfg.WorkspaceLimits(), Chown: uid >= 0, UID: uid, GID: gid})
		if err != nil && ctx.Err() == nil && sctx.Err() != nil {
			return &archiveError{object, fmt.Errorf("not extracted within %v", seedTimeout)}
		}
		if err != nil {
			return err
		}
		log.Info().Str("archive", arch.Object).Int("entries", st.Entries).Int64("bytes", st.Bytes).
			Dur("took", time.Since(start)).Msg("workspace seeded from its archive")
		return nil
	}
}

// extractArchive extracts arch from the workspaces stream into root,
// failing when what was read does not have the digest its name says (a
// chunk uploaded with other content): the caller removes what was
// extracted.
func (w *Worker) extractArchive(ctx context.Context, arch *sandbox.WorkspaceArchive, root *os.Root, o unpack.Options) (unpack.Stats, error) {
	digest, ok := protocol.WorkspaceDigest(arch.Object)
	if !ok || protocol.WorkspaceDigestHeader(digest) != arch.Digest {
		// A spec of an older baton, whose archive was in an object store.
		return unpack.Stats{}, &archiveError{arch.Object, fmt.Errorf("not in the bucket %s: it was pinned by an older baton", w.names.WorkspacesStream())}
	}
	obj := wsarchive.Open(ctx, w.workspaces, w.names, digest, arch.Size)
	defer obj.Close()
	st, err := unpack.Extract(ctx, obj, root, o)
	if err != nil {
		return st, &archiveError{arch.Object, err}
	}
	if got := "SHA-256=" + base64.URLEncoding.EncodeToString(st.SHA256[:]); got != arch.Digest {
		return st, &archiveError{arch.Object, fmt.Errorf("its digest is %s, not %s as its name says: it was uploaded with other content (whoever uploads a name first owns it until workspacesMaxAge)", got, arch.Digest)}
	}
	return st, nil
}

// baselineDir is where a run's workspace archive is extracted again, with
// its seed files, as the diff's baseline: in the run directory, which the
// agent cannot reach.
func baselineDir(r *run) string { return filepath.Join(string(r.dir), "baseline") }

// baseline lays out what r's workspace was seeded with, from the store
// (pinned by the digest its spec recorded) and its spec, never from the
// workspace. The caller calls done when the capture is over.
func (w *Worker) baseline(ctx context.Context, r *run, spec sandbox.Spec) (_ outputs.Baseline, done func(), err error) {
	if spec.Workspace == nil && spec.Git == nil {
		return outputs.FilesBaseline(spec.Files), func() {}, nil
	}
	dir := baselineDir(r)
	if err := removeTree(dir); err != nil { // a capture cut short before
		return nil, nil, err
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, nil, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, nil, err
	}
	scratch := dir + ".git" // a cloned commit's objects are read through it
	cleanup := func() {
		root.Close()
		for _, d := range []string{dir, scratch} {
			if err := removeTree(d); err != nil {
				r.log.Warn().Err(err).Msg("remove the diff's baseline")
			}
		}
	}
	defer func() {
		if err != nil {
			cleanup()
		}
	}()
	if spec.Git != nil {
		commit, err := sandbox.ClonedCommit(r.dir)
		if err != nil {
			return nil, nil, fmt.Errorf("repository %s: %w", spec.Git.URL, err)
		}
		if err := removeTree(scratch); err != nil {
			return nil, nil, err
		}
		gctx, cancel := context.WithTimeout(ctx, seedTimeout)
		defer cancel()
		if err := gitTree(gctx, r.dir.Workspace(), scratch, commit, root, w.cfg.WorkspaceLimits().MaxBytes); err != nil {
			return nil, nil, fmt.Errorf("repository %s at %s: %w", spec.Git.URL, commit, err)
		}
		return outputs.TreeBaseline(root), cleanup, nil
	}
	if _, err := w.extractArchive(ctx, spec.Workspace, root, unpack.Options{Limits: w.cfg.WorkspaceLimits()}); err != nil {
		return nil, nil, err
	}
	if err := sandbox.WriteSeeds(ctx, dir, spec.Files, -1, -1); err != nil {
		return nil, nil, err
	}
	return outputs.TreeBaseline(root), cleanup, nil
}
