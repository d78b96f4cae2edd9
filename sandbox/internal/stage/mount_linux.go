package stage

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/sandbox/runspec"
	"golang.org/x/sys/unix"
)

// newRootBase is where runner-inner-child mounts the agent's root before
// pivoting into it. Mounting there hides the host's /tmp only in this
// mount namespace, and every host source is opened first, so nothing
// under it is lost.
const newRootBase = "/tmp"

// source is a host file or directory the agent's root binds, opened
// before anything is mounted.
type source struct {
	fd   int
	dir  bool
	link string // a symlink's target: recreated rather than bound
}

func (s source) path() string { return "/proc/self/fd/" + strconv.Itoa(s.fd) }

// openSource opens a host path without following a final symlink; ok is
// false when it does not exist.
func openSource(path string) (source, bool, error) {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return source{}, false, nil
		}
		return source{}, false, fmt.Errorf("%s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		link, err := os.Readlink(path)
		return source{fd: -1, link: link}, err == nil, err
	}
	fd, err := unix.Open(path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return source{}, false, fmt.Errorf("%s: %w", path, err)
	}
	return source{fd: fd, dir: st.Mode&unix.S_IFMT == unix.S_IFDIR}, true, nil
}

// openChecked opens a profile mount's source with no symlink anywhere on
// its (already resolved) path and checks it is the file runner-outer saw.
func openChecked(m bindMount) (source, error) {
	fd, err := unix.Openat2(unix.AT_FDCWD, m.Source, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return source{}, fmt.Errorf("mount source %s: %w (the sandbox uid must be able to reach it)", m.Source, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Dev != m.Dev || st.Ino != m.Ino {
		unix.Close(fd)
		return source{}, fmt.Errorf("mount source %s changed since the runner checked it", m.Source)
	}
	return source{fd: fd, dir: st.Mode&unix.S_IFMT == unix.S_IFDIR}, nil
}

// rootBuilder assembles the agent's root under newRootBase.
type rootBuilder struct {
	spec    childSpec
	sources []source // closed once the root is built
}

func (b *rootBuilder) close() {
	for _, s := range b.sources {
		if s.fd >= 0 {
			unix.Close(s.fd)
		}
	}
	b.sources = nil
}

// at is p inside the root being built.
func at(p string) string { return filepath.Join(newRootBase, p) }

// mountFS mounts a filesystem of fstype on an empty directory it makes at
// p in the new root.
func mountFS(fstype, p string, flags uintptr, data string) error {
	mp, err := newRoot.target(p, true)
	if err != nil {
		return fmt.Errorf("mount point %s: %w", p, err)
	}
	defer mp.close()
	return unix.Mount(fstype, mp.path(), fstype, flags, data)
}

// bind mounts src at dst (inside the new root) and makes every mount of
// the bind read-only (unless writable), nosuid and nodev (unless a
// device), recursively and for real: mount_setattr changes the mounts
// themselves, not just the first.
func bind(src source, dst string, writable, device bool) error {
	mp, err := newRoot.target(dst, src.dir)
	if err != nil {
		return fmt.Errorf("mount point %s: %w", dst, err)
	}
	defer mp.close()
	if err := unix.Mount(src.path(), mp.path(), "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s: %w", dst, err)
	}
	attr := uint64(unix.MOUNT_ATTR_NOSUID)
	if !writable {
		attr |= unix.MOUNT_ATTR_RDONLY
	}
	if device {
		attr |= unix.MOUNT_ATTR_NOEXEC
	} else {
		attr |= unix.MOUNT_ATTR_NODEV
	}
	return newRoot.setattr(dst, attr, true)
}

// setattr sets attributes of the mount at p, a path under r resolved in it.
func (r rootDir) setattr(p string, set uint64, recursive bool) error {
	fd, err := r.open(p, unix.O_PATH|unix.O_NOFOLLOW)
	if err != nil {
		return fmt.Errorf("mount_setattr %s: %w", p, err)
	}
	defer unix.Close(fd)
	flags := unix.AT_EMPTY_PATH
	if recursive {
		flags |= unix.AT_RECURSIVE
	}
	if err := unix.MountSetattr(fd, "", uint(flags), &unix.MountAttr{Attr_set: set}); err != nil {
		return fmt.Errorf("mount_setattr %s: %w", p, err)
	}
	return nil
}

// open takes every host source the root needs, before anything is
// mounted: the system directories, the host's /etc entries, the device
// nodes, the workspace (this process's cwd), the runner's binary and the
// profile's mounts.
func (b *rootBuilder) open() (srcs map[string]source, err error) {
	srcs = map[string]source{}
	add := func(key, path string) error {
		s, ok, err := openSource(path)
		if err != nil {
			return err
		}
		if ok {
			b.sources = append(b.sources, s)
			srcs[key] = s
		}
		return nil
	}
	for _, d := range systemDirs {
		if err := add(d, d); err != nil {
			return nil, err
		}
	}
	for _, e := range hostEtc {
		if err := add("/etc/"+e, "/etc/"+e); err != nil {
			return nil, err
		}
	}
	for _, d := range devNodes {
		if err := add("/dev/"+d, "/dev/"+d); err != nil {
			return nil, err
		}
		if _, ok := srcs["/dev/"+d]; !ok {
			return nil, fmt.Errorf("host /dev/%s is missing", d)
		}
	}
	// This process's cwd, the agent directory (or, in a run directory
	// made before it, the workspace), is in this mount namespace, where
	// the clone moved it: what it holds is opened from it.
	agent := map[string]string{"workspace": "."}
	if b.spec.Home {
		agent = map[string]string{"workspace": journal.WorkspaceName, "home": journal.HomeName}
	}
	for _, key := range slices.Sorted(maps.Keys(agent)) {
		fd, err := unix.Open(agent[key], unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("the %s: %w", key, err)
		}
		b.sources = append(b.sources, source{fd: fd, dir: true})
		srcs[key] = source{fd: fd, dir: true}
	}
	if b.spec.Binary != "" {
		// By its path (/proc/self/exe would name the file on a mount of
		// the namespace this process was cloned from, which cannot be
		// bound here); the identity runner-outer found keeps it the same
		// file.
		fd, err := unix.Open(b.spec.Binary, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("the baton binary %s: %w%s", b.spec.Binary, err, searchHint(err))
		}
		b.sources = append(b.sources, source{fd: fd})
		var got unix.Stat_t
		if unix.Fstat(fd, &got) != nil || got.Dev != b.spec.BinaryDev || got.Ino != b.spec.BinaryIno {
			return nil, fmt.Errorf("%s is no longer the baton binary the runner found", b.spec.Binary)
		}
		srcs["binary"] = source{fd: fd}
	}
	for i, m := range b.spec.Mounts {
		s, err := openChecked(m)
		if err != nil {
			return nil, err
		}
		b.sources = append(b.sources, s)
		srcs["mount"+strconv.Itoa(i)] = s
	}
	return srcs, nil
}

// devNodes are the device nodes of the agent's /dev.
var devNodes = []string{"null", "zero", "full", "random", "urandom", "tty"}

// procReadOnly are /proc entries the agent may read but never write;
// procMasked are hidden.
var (
	procReadOnly = []string{"sys", "sysrq-trigger", "irq", "bus", "fs"}
	procMasked   = []string{"kcore", "keys", "key-users", "timer_list", "sched_debug", "latency_stats", "acpi", "scsi", "kallsyms", "kpagecount", "kpageflags", "kpagecgroup", "config.gz"}
)

// build lays out the agent's root under newRootBase, recording each part.
func (b *rootBuilder) build(workspace string, step func(phase string, do func() (string, error)) error) error {
	defer b.close()
	var srcs map[string]source
	if err := step("host-sources", func() (detail string, err error) {
		srcs, err = b.open()
		return fmt.Sprintf("%d opened", len(b.sources)), err
	}); err != nil {
		return err
	}
	s := b.spec
	steps := []struct {
		phase string
		do    func() (string, error)
	}{
		{"root-tmpfs", func() (string, error) {
			return "tmpfs on " + newRootBase, unix.Mount("tmpfs", newRootBase, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=16m")
		}},
		{"system-dirs", func() (string, error) {
			var done []string
			for _, d := range systemDirs {
				src, ok := srcs[d]
				switch {
				case !ok:
					continue
				case src.link != "":
					if err := newRoot.symlink(src.link, at(d)); err != nil {
						return "", err
					}
					done = append(done, d+" -> "+src.link)
				default:
					if err := bind(src, at(d), false, false); err != nil {
						return "", err
					}
					done = append(done, d+" ro")
				}
			}
			return strings.Join(done, ", "), nil
		}},
		{"etc", func() (string, error) { return b.etc(srcs) }},
		{"dev", func() (string, error) { return "", b.dev(srcs) }},
		{"proc", func() (string, error) { return b.proc() }},
		{"tmp", func() (string, error) {
			return fmt.Sprintf("tmpfs, %d bytes", s.TmpBytes), mountFS("tmpfs", at("/tmp"), unix.MS_NOSUID|unix.MS_NODEV,
				fmt.Sprintf("mode=1777,size=%d", s.TmpBytes))
		}},
		{"workspace", func() (string, error) {
			return workspace + " rw", bind(srcs["workspace"], at(workspace), true, false)
		}},
		{"home", func() (string, error) {
			src, ok := srcs["home"]
			if !ok {
				return "none: HOME is the workspace (a run directory made before homes)", nil
			}
			return runspec.HomePath + " rw", bind(src, at(runspec.HomePath), true, false)
		}},
		{"mounts", func() (string, error) { return b.profileMounts(srcs) }},
	}
	for _, st := range steps {
		if err := step(st.phase, st.do); err != nil {
			return err
		}
	}
	return nil
}

func (b *rootBuilder) etc(srcs map[string]source) (string, error) {
	if err := os.Mkdir(at("/etc"), 0o755); err != nil {
		return "", err
	}
	for _, name := range slices.Sorted(maps.Keys(b.spec.Etc)) {
		if err := os.WriteFile(at("/etc/"+name), []byte(b.spec.Etc[name]), 0o644); err != nil {
			return "", err
		}
	}
	var bound []string
	for _, e := range hostEtc {
		src, ok := srcs["/etc/"+e]
		if !ok {
			continue
		}
		dst := at("/etc/" + e)
		if src.link != "" {
			if err := newRoot.symlink(src.link, dst); err != nil {
				return "", err
			}
		} else if err := bind(src, dst, false, false); err != nil {
			return "", err
		}
		bound = append(bound, e)
	}
	return "generated " + strings.Join(slices.Sorted(maps.Keys(b.spec.Etc)), " ") + "; host " + strings.Join(bound, " "), nil
}

func (b *rootBuilder) dev(srcs map[string]source) error {
	dev := at("/dev")
	if err := mountFS("tmpfs", dev, unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755,size=64k"); err != nil {
		return err
	}
	for _, d := range devNodes {
		if err := bind(srcs["/dev/"+d], filepath.Join(dev, d), true, true); err != nil {
			return err
		}
	}
	for name, to := range map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1",
		"stderr": "/proc/self/fd/2", "ptmx": "pts/ptmx"} {
		if err := newRoot.symlink(to, filepath.Join(dev, name)); err != nil {
			return err
		}
	}
	for _, d := range []string{"pts", "shm"} {
		if err := os.Mkdir(filepath.Join(dev, d), 0o755); err != nil {
			return err
		}
	}
	// A devpts of its own: the agent sees no host terminal.
	if err := unix.Mount("devpts", filepath.Join(dev, "pts"), "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"); err != nil {
		return fmt.Errorf("devpts: %w", err)
	}
	if err := unix.Mount("tmpfs", filepath.Join(dev, "shm"), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV,
		fmt.Sprintf("mode=1777,size=%d", b.spec.ShmBytes)); err != nil {
		return fmt.Errorf("/dev/shm: %w", err)
	}
	return newRoot.setattr(dev, unix.MOUNT_ATTR_RDONLY, false)
}

// proc mounts a /proc of the sandbox's pid namespace, with the entries
// that reach the kernel read-only and those that show host internals
// hidden.
func (b *rootBuilder) proc() (string, error) {
	p := at("/proc")
	if err := mountFS("proc", p, unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return "", err
	}
	for _, e := range procReadOnly {
		q := filepath.Join(p, e)
		if _, err := os.Lstat(q); err != nil {
			continue
		}
		if err := unix.Mount(q, q, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return "", fmt.Errorf("bind /proc/%s: %w", e, err)
		}
		if err := newRoot.setattr(q, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC, true); err != nil {
			return "", err
		}
	}
	var masked []string
	for _, e := range procMasked {
		q := filepath.Join(p, e)
		fi, err := os.Lstat(q)
		if err != nil {
			continue
		}
		if fi.IsDir() {
			err = unix.Mount("tmpfs", q, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=0")
		} else {
			err = unix.Mount(at("/dev/null"), q, "", unix.MS_BIND, "")
		}
		if err != nil {
			return "", fmt.Errorf("mask /proc/%s: %w", e, err)
		}
		masked = append(masked, e)
	}
	return "read-only " + strings.Join(procReadOnly, " ") + "; masked " + strings.Join(masked, " "), nil
}

// profileMounts binds the runner's binary and the profile's mounts,
// parents before children.
func (b *rootBuilder) profileMounts(srcs map[string]source) (string, error) {
	var done []string
	if b.spec.Binary != "" {
		if err := bind(srcs["binary"], at(b.spec.Binary), false, false); err != nil {
			return "", err
		}
		done = append(done, "baton at "+b.spec.Binary)
	}
	order := make([]int, len(b.spec.Mounts))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(x, y int) int {
		return strings.Count(b.spec.Mounts[x].Dest, "/") - strings.Count(b.spec.Mounts[y].Dest, "/")
	})
	for _, i := range order {
		m := b.spec.Mounts[i]
		if err := bind(srcs["mount"+strconv.Itoa(i)], at(m.Dest), m.Writable, false); err != nil {
			return "", err
		}
		mode := "ro"
		if m.Writable {
			mode = "rw"
		}
		done = append(done, m.Source+" -> "+m.Dest+" "+mode)
	}
	return strings.Join(done, ", "), nil
}

// pivot makes the built root the agent's /: the host's old root is
// detached whole, and the new root itself turns read-only.
func pivot(workspace string) error {
	if err := os.Chdir(newRootBase); err != nil {
		return err
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach the old root: %w", err)
	}
	if err := os.Chdir("/"); err != nil {
		return err
	}
	if err := rootDir("/").setattr("/", unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV, false); err != nil {
		return err
	}
	return os.Chdir(workspace)
}

// searchHint says what to fix when the sandbox uid cannot reach a host
// path: a directory above it that others may not search.
func searchHint(err error) string {
	if !errors.Is(err, unix.EACCES) {
		return ""
	}
	return " (the sandbox uid must be able to search every directory above it: a state dir under a 0700" +
		" directory, such as a home or a mktemp -d, is not; `baton doctor --state-dir DIR` checks it)"
}
