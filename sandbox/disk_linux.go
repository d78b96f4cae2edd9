package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/sandbox/internal/stage"
)

// ErrDiskSetup: the run's bounded workspace could not be made.
var ErrDiskSetup = errors.New("sandbox: cannot make the bounded workspace")

// DiskFullDetail ends the reason of a failed run whose workspace was full.
const DiskFullDetail = stage.DiskFullDetail

// workspaceImage is the file that holds a root worker's workspace: a
// sparse ext4 image of limits.disk bytes, loop-mounted on the workspace.
func workspaceImage(dir journal.Dir) string { return filepath.Join(string(dir), WorkspaceImageName) }

// WorkspaceImageName is the run directory's workspace image, if it has one.
const WorkspaceImageName = "workspace.img"

// mkfsTimeout bounds mkfs.ext4 on a sparse image (tens of milliseconds
// when idle).
const mkfsTimeout = 30 * time.Second

// mountWorkspace makes the run's agent directory, which holds its
// workspace and home, the root of a fresh ext4 filesystem of size bytes
// in a sparse image beside it, mounted in the caller's (the host's)
// mount namespace: the agent's files and its home's share limits.disk,
// and outlive the worker and the runner, readable after the run until
// ReleaseWorkspace. The loop device clears itself at unmount. The
// workspace and home are made there, owned by uid:gid.
func mountWorkspace(ctx context.Context, dir journal.Dir, size uint64, uid, gid int) error {
	img := workspaceImage(dir)
	// A pooled image comes formatted, and mounted unless that failed.
	mnt, pooled := takeImage(dir, size, uid, gid)
	if mnt == nil {
		flags := os.O_RDWR | unix.O_NOFOLLOW | unix.O_CLOEXEC
		if !pooled {
			flags |= os.O_CREATE | os.O_EXCL
		}
		f, err := os.OpenFile(img, flags, 0o600)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrDiskSetup, err)
		}
		if !pooled {
			err = formatImage(ctx, f, size, uid, gid)
		}
		if err == nil {
			mnt, err = mountDetached(f)
		}
		f.Close()
		if err != nil {
			return fmt.Errorf("%w: %w", ErrDiskSetup, err)
		}
	}
	err := unix.MoveMount(int(mnt.Fd()), "", unix.AT_FDCWD, dir.Agent(), unix.MOVE_MOUNT_F_EMPTY_PATH)
	mnt.Close() // unmounts it if the move failed
	if err != nil {
		return fmt.Errorf("%w: mount the image on %s: %w", ErrDiskSetup, dir.Agent(), err)
	}
	// mkfs leaves lost+found, which the agent has no use for.
	_ = os.Remove(filepath.Join(dir.Agent(), "lost+found"))
	// The filesystem's root is 0755: make it the agent's alone, as an
	// unbounded agent directory is.
	if err := os.Chmod(dir.Agent(), 0o700); err != nil {
		return fmt.Errorf("%w: chmod the agent's directory: %w", ErrDiskSetup, err)
	}
	return nil
}

// The workspace filesystem's mount attributes and data: no set-id
// programs or devices, no access times, and inode tables never zeroed
// (mkfs left them lazy, and a fresh image reads as zeroes anyway).
const (
	mountAttrs = unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV | unix.MOUNT_ATTR_NOATIME
	mountData  = "noinit_itable"
)

// mountDetached mounts image f, through a loop device, in no mount
// namespace (fsmount), and returns the mount's descriptor: moved onto a
// directory (move_mount) it is mounted there; closed unmoved, it is
// unmounted and frees the loop device.
func mountDetached(f *os.File) (*os.File, error) {
	loop, err := attachLoop(f)
	if err != nil {
		return nil, err
	}
	defer loop.Close()
	fsfd, err := unix.Fsopen("ext4", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("fsopen: %w", err)
	}
	defer unix.Close(fsfd)
	if err := unix.FsconfigSetString(fsfd, "source", loop.Name()); err != nil {
		return nil, fmt.Errorf("fsconfig source: %w", err)
	}
	if err := unix.FsconfigSetFlag(fsfd, mountData); err != nil {
		return nil, fmt.Errorf("fsconfig %s: %w", mountData, err)
	}
	if err := unix.FsconfigCreate(fsfd); err != nil {
		return nil, fmt.Errorf("fsconfig create: %w", err)
	}
	mfd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, mountAttrs)
	if err != nil {
		return nil, fmt.Errorf("fsmount: %w", err)
	}
	return os.NewFile(uintptr(mfd), "workspace-mount"), nil
}

// loopMu serialises this process's loop attachments: LOOP_CTL_GET_FREE
// offers every concurrent caller the same device, and with a worker
// starting hundreds of runs at once all but one lose each round (the
// density bench row: "no free loop device after 16 tries" at 20 runs).
var loopMu sync.Mutex

// attachLoop binds a free loop device to f, cleared at its last close or
// unmount (LO_FLAGS_AUTOCLEAR).
func attachLoop(f *os.File) (*os.File, error) {
	loopMu.Lock()
	defer loopMu.Unlock()
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("loop devices: %w", err)
	}
	defer ctl.Close()
	// Another process may take the device we were offered: ask again.
	for range 16 {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return nil, fmt.Errorf("get a free loop device: %w", err)
		}
		dev, err := os.OpenFile(fmt.Sprintf("/dev/loop%d", n), os.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("loop device: %w", err)
		}
		cfg := unix.LoopConfig{Fd: uint32(f.Fd())}
		cfg.Info.Flags = unix.LO_FLAGS_AUTOCLEAR
		err = unix.IoctlLoopConfigure(int(dev.Fd()), &cfg)
		if err == nil {
			return dev, nil
		}
		dev.Close()
		if !errors.Is(err, unix.EBUSY) {
			return nil, fmt.Errorf("configure %s: %w", dev.Name(), err)
		}
	}
	return nil, errors.New("no free loop device after 16 tries")
}

// ReleaseWorkspace unmounts the run's bounded agent directory (its
// workspace and home), if it is mounted, which frees its loop device; the
// image stays until the run directory is removed. Call it before removing
// a run directory: a run made by a root worker has its workspace on a
// filesystem of its own.
func ReleaseWorkspace(dir journal.Dir) error {
	// A run directory made before the agent directory had its image on
	// the workspace.
	for _, p := range []string{dir.Agent(), dir.Workspace()} {
		err := unix.Unmount(p, unix.UMOUNT_NOFOLLOW|unix.MNT_DETACH)
		switch {
		case err == nil, errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOENT):
			// EINVAL: not a mount point (a non-root run, or after a reboot).
		default:
			return fmt.Errorf("sandbox: unmount %s: %w", p, err)
		}
	}
	return nil
}

// DiscardWorkspace gives back a finished run's bounded workspace: it
// unmounts it (ReleaseWorkspace), which frees its loop device, and
// removes its image, whose blocks are the state filesystem's. The files
// the workspace held go with it; call it once the run's outputs are
// captured and no runner holds the run. A run without an image (a
// non-root worker's, or one discarded already) is left as it is.
func DiscardWorkspace(dir journal.Dir) error {
	img := workspaceImage(dir)
	if _, err := os.Lstat(img); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := ReleaseWorkspace(dir); err != nil {
		return err
	}
	if err := os.Remove(img); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("sandbox: remove the workspace image of %s: %w", dir, err)
	}
	return nil
}
