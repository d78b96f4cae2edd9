package stage

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/batonhq/baton/sandbox/runspec"
)

// runCgroup is a run's cgroup v2, open for clone's CLONE_INTO_CGROUP.
type runCgroup struct {
	path string
	dir  *os.File
}

// openRunCgroup creates the run's cgroup under parent with the profile's
// limits, owned by uid and gid (the sandbox's, which start the chain in
// it). With no parent it returns nil, or an error when the limits need a
// cgroup: nothing runs with less isolation than its profile asks for.
func openRunCgroup(parent, runID string, l runspec.Limits, uid, gid int) (*runCgroup, error) {
	if parent == "" {
		if needsCgroup(l) {
			return nil, errors.New("the profile limits memory or cpus, which needs a delegated cgroup v2" +
				" (cgroupParent in the configuration; `baton doctor` checks it)")
		}
		return nil, nil
	}
	if err := CheckCgroupParent(parent, cgroupControllers(cgroupFiles(l))); err != nil {
		return nil, err
	}
	gcRunCgroups(parent)
	path := filepath.Join(parent, runCgroupName(runID))
	if err := os.Mkdir(path, 0o755); err != nil {
		return nil, fmt.Errorf("create cgroup %s: %w", path, err)
	}
	files := cgroupFiles(l)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if err := os.WriteFile(filepath.Join(path, name), []byte(files[name]), 0); err != nil {
			_ = os.Remove(path)
			return nil, fmt.Errorf("cgroup %s: write %s: %w", path, name, err)
		}
	}
	// The chain starts in it after the runner dropped to the sandbox uid,
	// which moving a process in needs to write cgroup.procs.
	for _, p := range []string{path, filepath.Join(path, "cgroup.procs")} {
		if err := os.Lchown(p, uid, gid); err != nil && !errors.Is(err, unix.EPERM) {
			_ = os.Remove(path)
			return nil, fmt.Errorf("cgroup %s: %w", path, err)
		}
	}
	dir, err := os.OpenFile(path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		_ = os.Remove(path)
		return nil, err
	}
	return &runCgroup{path: path, dir: dir}, nil
}

// CheckCgroupParent says why parent cannot hold the runs' cgroups.
func CheckCgroupParent(parent string, controllers []string) error {
	var fs unix.Statfs_t
	if err := unix.Statfs(parent, &fs); err != nil {
		return fmt.Errorf("cgroupParent %s: %w", parent, err)
	}
	if fs.Type != unix.CGROUP2_SUPER_MAGIC {
		return fmt.Errorf("cgroupParent %s is not a cgroup v2 directory (this machine may use cgroup v1; `baton doctor` says more)", parent)
	}
	b, err := os.ReadFile(filepath.Join(parent, "cgroup.subtree_control"))
	if err != nil {
		return fmt.Errorf("cgroupParent %s: %w", parent, err)
	}
	have := parseCgroupControllers(string(b))
	var missing []string
	for _, c := range controllers {
		if !have[c] {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("cgroupParent %s does not delegate %s: enable them with echo '+%s' > %s/cgroup.subtree_control",
			parent, strings.Join(missing, ", "), strings.Join(missing, " +"), parent)
	}
	return nil
}

// gcRunCgroups removes the empty cgroups of ended runs: a runner that
// dropped its privileges could not remove its own.
func gcRunCgroups(parent string) {
	ents, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "baton-") {
			continue
		}
		p := filepath.Join(parent, e.Name())
		if b, err := os.ReadFile(filepath.Join(p, "cgroup.events")); err == nil && strings.Contains(string(b), "populated 0") {
			_ = os.Remove(p)
		}
	}
}

// close releases the cgroup and removes it if the runner may.
func (c *runCgroup) close() {
	if c == nil {
		return
	}
	_ = c.dir.Close()
	_ = os.Remove(c.path)
}
