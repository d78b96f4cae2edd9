package seccomp

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/batonhq/baton/internal/testenv"
)

// TestMain runs the filtered half of TestInstall when asked to.
func TestMain(m *testing.M) {
	if os.Getenv("SECCOMP_TEST_CHILD") == "1" {
		os.Exit(filteredChild())
	}
	os.Exit(m.Run())
}

// filteredChild installs the native filter and prints what each probe
// returned, one "name errno" per line.
func filteredChild() int {
	runtime.LockOSThread()
	a, err := Native()
	if err != nil {
		fmt.Println("native", err)
		return 1
	}
	prog, err := Build(a)
	if err == nil {
		err = Install(prog)
	}
	if err != nil {
		fmt.Println("install", err)
		return 1
	}
	probe := func(name string, nr uintptr, args ...uintptr) {
		var a [6]uintptr
		copy(a[:], args)
		_, _, e := unix.Syscall6(nr, a[0], a[1], a[2], a[3], a[4], a[5])
		fmt.Println(name, int(e))
	}
	probe("getpid", unix.SYS_GETPID)
	probe("ptrace", unix.SYS_PTRACE, unix.PTRACE_TRACEME)
	probe("unshare-user", unix.SYS_UNSHARE, unix.CLONE_NEWUSER)
	probe("io_uring_setup", unix.SYS_IO_URING_SETUP, 1, 0)
	probe("keyctl", unix.SYS_KEYCTL, unix.KEYCTL_GET_KEYRING_ID, uintptr(0xfffffffd), 0) // KEY_SPEC_SESSION_KEYRING
	probe("mount", unix.SYS_MOUNT, 0, 0, 0, 0, 0)
	probe("clone3", unix.SYS_CLONE3, 0, 0)
	// A pipe is no terminal: unfiltered, TIOCSTI says ENOTTY.
	var p [2]int
	_ = unix.Pipe(p[:])
	probe("tiocsti", unix.SYS_IOCTL, uintptr(p[0]), unix.TIOCSTI, 0)
	probe("tiocsti-high", unix.SYS_IOCTL, uintptr(p[0]), 1<<32|unix.TIOCSTI, 0)
	probe("tcgets", unix.SYS_IOCTL, uintptr(p[0]), unix.TCGETS, 0)
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "Seccomp:") || strings.HasPrefix(l, "NoNewPrivs:") {
				fmt.Println(strings.Join(strings.Fields(l), " "))
			}
		}
	}
	return 0
}

func TestInstall(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "SECCOMP_TEST_CHILD=1")
	out, err := testenv.Output(cmd)
	if err != nil {
		t.Fatalf("filtered child: %v\n%s", err, out)
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok {
			got[k] = v
		}
	}
	eperm, enosys, enotty := fmt.Sprint(int(syscall.EPERM)), fmt.Sprint(int(syscall.ENOSYS)), fmt.Sprint(int(syscall.ENOTTY))
	want := map[string]string{
		"getpid": "0", "ptrace": eperm, "unshare-user": eperm, "io_uring_setup": eperm, "keyctl": eperm,
		"mount": eperm, "clone3": enosys, "tiocsti": eperm, "tiocsti-high": eperm, "tcgets": enotty,
		"Seccomp:": "2", "NoNewPrivs:": "1",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if t.Failed() {
		t.Logf("child output:\n%s", out)
	}
}

func TestInstallRefusesEmpty(t *testing.T) {
	if err := Install(nil); err == nil || errors.Is(err, unix.EINVAL) {
		t.Fatalf("Install(nil) = %v", err)
	}
}
