package worker

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/batonhq/baton/internal/pidfd"
	"github.com/batonhq/baton/lease"
)

// recordSession writes this worker's record naming liveness session id.
func (w *Worker) recordSession(id uint64) {
	if err := w.writeWorkerFile(id); err != nil {
		w.log.Warn().Err(err).Msg("write this worker's record; if it dies, its runs wait for its lease TTL")
	}
}

// writeWorkerFile writes this worker's record (see siblings.go) naming
// liveness session, whole or not at all.
func (w *Worker) writeWorkerFile(session uint64) error {
	path, err := workerFile(w.stateDir, w.id)
	if err != nil {
		return err
	}
	start, err := procStart(os.Getpid())
	if err != nil {
		return err
	}
	ns, err := pidNamespace()
	if err != nil {
		return err
	}
	rec := workerRecord{Worker: w.id, Node: w.node, Session: session, PID: os.Getpid(), Start: start, PIDNS: ns}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// removeWorkerFile removes this worker's record as it stops.
func (w *Worker) removeWorkerFile() {
	if path, err := workerFile(w.stateDir, w.id); err == nil {
		_ = os.Remove(path)
	}
}

// siblings watches the processes of the node's other workers (see
// siblings.go), each once, and ends the liveness session of one whose
// process exits without ending it.
type siblings struct {
	stateDir string
	node     string
	self     string // this worker's id: never watched
	live     *lease.Liveness
	log      zerolog.Logger

	mu      sync.Mutex
	watched map[string]bool
}

func (w *Worker) newSiblings() *siblings {
	return &siblings{stateDir: w.stateDir, node: w.node, self: w.id, live: w.live, log: w.log, watched: map[string]bool{}}
}

// scan watches the node's other workers whose records are in the state
// directory; the recovery's lease watch adds those whose liveness keys it
// sees written later.
func (sb *siblings) scan(ctx context.Context) {
	entries, err := os.ReadDir(workersDir(sb.stateDir))
	if err != nil {
		return
	}
	for _, e := range entries {
		if id, ok := strings.CutSuffix(e.Name(), ".json"); ok {
			sb.watch(ctx, id)
		}
	}
}

// watch watches worker id's process, once, and ends its liveness session
// when it exits, or at once if it has exited already. A worker whose
// record is missing or refused is left to its lease TTL, and looked at
// again on its next renewal.
func (sb *siblings) watch(ctx context.Context, id string) {
	if id == sb.self {
		return
	}
	sb.mu.Lock()
	if sb.watched[id] {
		sb.mu.Unlock()
		return
	}
	sb.watched[id] = true
	sb.mu.Unlock()
	forget := func() {
		sb.mu.Lock()
		delete(sb.watched, id)
		sb.mu.Unlock()
	}
	rec, err := readWorkerRecord(sb.stateDir, id)
	if err != nil || rec.Worker != id || rec.Node != sb.node {
		forget()
		return
	}
	if ns, err := pidNamespace(); err != nil || ns != rec.PIDNS || rec.PID == os.Getpid() {
		// Another container's pids mean nothing here; a worker in this
		// very process (tests) cannot be dead while we run. Left watched.
		return
	}
	gone := func() {
		// Not on the caller's goroutine (the lease watch): NATS round trips.
		go func() {
			sb.end(ctx, rec, "its process is gone")
			forget()
		}()
	}
	fd, err := unix.PidfdOpen(rec.PID, unix.PIDFD_NONBLOCK)
	if errors.Is(err, unix.ESRCH) {
		gone()
		return
	}
	if err != nil {
		forget()
		return
	}
	// Pinned by the pidfd, then checked: a recycled pid starts later.
	if start, err := procStart(rec.PID); err != nil || start != rec.Start {
		unix.Close(fd)
		gone()
		return
	}
	f := os.NewFile(uintptr(fd), "worker-pidfd")
	err = pidfd.Watch(ctx, f, func(exited bool) {
		f.Close()
		if exited {
			sb.end(ctx, rec, "its process exited")
		}
		forget()
	})
	if err != nil {
		f.Close()
		forget()
	}
}

// end ends the liveness session of a worker of this node whose process
// has exited, and removes its record. The session is the one its record
// names now: it writes its record again at each new session.
func (sb *siblings) end(ctx context.Context, rec workerRecord, why string) {
	if cur, err := readWorkerRecord(sb.stateDir, rec.Worker); err == nil && sameProcess(cur, rec) {
		rec = cur
	}
	ended, err := sb.live.EndDead(ctx, rec.Node, rec.Worker, rec.Session)
	log := sb.log.With().Str("sibling", rec.Worker).Int("sibling_pid", rec.PID).Logger()
	switch {
	case err != nil:
		log.Warn().Err(err).Msg("end the liveness of a worker of this node whose process exited; its lease TTL will")
		return
	case ended:
		log.Info().Msg("a worker of this node exited without ending its liveness (" + why + "); ended it, its runs are recovered now")
	}
	// Its record, unless it was written again meanwhile (a new process
	// of the same worker id).
	if cur, err := readWorkerRecord(sb.stateDir, rec.Worker); err == nil && cur == rec {
		if path, err := workerFile(sb.stateDir, rec.Worker); err == nil {
			_ = os.Remove(path)
		}
	}
}

// readWorkerRecord reads worker id's record.
func readWorkerRecord(stateDir, id string) (workerRecord, error) {
	path, err := workerFile(stateDir, id)
	if err != nil {
		return workerRecord{}, err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return workerRecord{}, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxWorkerRecord+1))
	if err != nil {
		return workerRecord{}, err
	}
	return parseWorkerRecord(b)
}

// procStart is process pid's start time, in clock ticks since boot
// (/proc/<pid>/stat, field 22).
func procStart(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	return parseStatStart(b)
}

// pidNamespace is the inode of this process's pid namespace.
func pidNamespace() (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/pid", &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}
