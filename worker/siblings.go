package worker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// A worker writes <state>/workers/<id>.json while it runs: which process
// it is and which liveness session it holds. The node's other workers
// watch that process (pidfd) and, once it has exited without ending its
// session (SIGKILL, OOM, a crash), end the session for it (lease.EndDead),
// so its runs are taken over at once instead of a lease TTL later. The
// process is known by its pid, its start time (so a recycled pid is not
// it) and its pid namespace (so a worker in another container, whose pids
// mean nothing here, is left to the TTL).

// workerRecord is a worker's file in <state>/workers.
type workerRecord struct {
	Worker  string `json:"worker"`
	Node    string `json:"node"`
	Session uint64 `json:"session"`
	PID     int    `json:"pid"`
	// Start is the process's start time (/proc/<pid>/stat, clock ticks
	// since boot), and PIDNS its pid namespace's inode.
	Start uint64 `json:"start"`
	PIDNS uint64 `json:"pidns"`
}

// errBadRecord wraps every reason a worker file is refused.
var errBadRecord = errors.New("worker: bad worker record")

// maxWorkerRecord bounds a worker file's size.
const maxWorkerRecord = 4 << 10

var workerIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// workersDir is where a state directory's worker files are.
func workersDir(stateDir string) string { return filepath.Join(stateDir, "workers") }

// workerFile is worker id's file, for an id a liveness key can name.
func workerFile(stateDir, id string) (string, error) {
	if !workerIDPattern.MatchString(id) {
		return "", fmt.Errorf("%w: worker id %q", errBadRecord, id)
	}
	return filepath.Join(workersDir(stateDir), id+".json"), nil
}

// parseWorkerRecord decodes and checks a worker file: every field set, and
// nothing else.
func parseWorkerRecord(b []byte) (workerRecord, error) {
	if len(b) > maxWorkerRecord {
		return workerRecord{}, fmt.Errorf("%w: %d bytes", errBadRecord, len(b))
	}
	var r workerRecord
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return workerRecord{}, fmt.Errorf("%w: %w", errBadRecord, err)
	}
	if dec.More() {
		return workerRecord{}, fmt.Errorf("%w: trailing data", errBadRecord)
	}
	switch {
	case !workerIDPattern.MatchString(r.Worker), !workerIDPattern.MatchString(r.Node):
		return workerRecord{}, fmt.Errorf("%w: worker %q, node %q", errBadRecord, r.Worker, r.Node)
	case r.Session == 0, r.PID <= 0, r.Start == 0, r.PIDNS == 0:
		return workerRecord{}, fmt.Errorf("%w: session %d, pid %d, start %d, pid namespace %d", errBadRecord, r.Session, r.PID, r.Start, r.PIDNS)
	}
	return r, nil
}

// parseStatStart reads the start time out of /proc/<pid>/stat: fields are
// counted from the last ')', as the command name may hold anything.
func parseStatStart(b []byte) (uint64, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("stat without a command name")
	}
	fields := strings.Fields(string(b[i+1:]))
	// fields[0] is field 3 (state); the start time is field 22.
	if len(fields) < 20 {
		return 0, fmt.Errorf("stat has %d fields after the command name", len(fields))
	}
	return strconv.ParseUint(fields[19], 10, 64)
}

// sameProcess reports whether two records are of one process of a worker,
// whatever session each names.
func sameProcess(a, b workerRecord) bool {
	a.Session = b.Session
	return a == b
}
