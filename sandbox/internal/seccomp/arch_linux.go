//go:build linux && (amd64 || arm64)

package seccomp

import "golang.org/x/sys/unix"

// commonDenied are the calls denied on every architecture.
var commonDenied = map[string]uint32{
	"ptrace":            unix.SYS_PTRACE,
	"process_vm_readv":  unix.SYS_PROCESS_VM_READV,
	"process_vm_writev": unix.SYS_PROCESS_VM_WRITEV,
	"process_madvise":   unix.SYS_PROCESS_MADVISE,
	"pidfd_getfd":       unix.SYS_PIDFD_GETFD,
	"kcmp":              unix.SYS_KCMP,
	"io_uring_setup":    unix.SYS_IO_URING_SETUP,
	"io_uring_enter":    unix.SYS_IO_URING_ENTER,
	"io_uring_register": unix.SYS_IO_URING_REGISTER,
	"bpf":               unix.SYS_BPF,
	"perf_event_open":   unix.SYS_PERF_EVENT_OPEN,
	"add_key":           unix.SYS_ADD_KEY,
	"request_key":       unix.SYS_REQUEST_KEY,
	"keyctl":            unix.SYS_KEYCTL,
	"userfaultfd":       unix.SYS_USERFAULTFD,
	"mount":             unix.SYS_MOUNT,
	"umount2":           unix.SYS_UMOUNT2,
	"pivot_root":        unix.SYS_PIVOT_ROOT,
	"fsopen":            unix.SYS_FSOPEN,
	"fsconfig":          unix.SYS_FSCONFIG,
	"fsmount":           unix.SYS_FSMOUNT,
	"fspick":            unix.SYS_FSPICK,
	"move_mount":        unix.SYS_MOVE_MOUNT,
	"open_tree":         unix.SYS_OPEN_TREE,
	"open_tree_attr":    unix.SYS_OPEN_TREE_ATTR,
	"mount_setattr":     unix.SYS_MOUNT_SETATTR,
	"kexec_load":        unix.SYS_KEXEC_LOAD,
	"kexec_file_load":   unix.SYS_KEXEC_FILE_LOAD,
	"init_module":       unix.SYS_INIT_MODULE,
	"finit_module":      unix.SYS_FINIT_MODULE,
	"delete_module":     unix.SYS_DELETE_MODULE,
	"setns":             unix.SYS_SETNS,
	"open_by_handle_at": unix.SYS_OPEN_BY_HANDLE_AT,
	"acct":              unix.SYS_ACCT,
	"swapon":            unix.SYS_SWAPON,
	"swapoff":           unix.SYS_SWAPOFF,
	"reboot":            unix.SYS_REBOOT,
	"syslog":            unix.SYS_SYSLOG,
	"quotactl":          unix.SYS_QUOTACTL,
	"vhangup":           unix.SYS_VHANGUP,
	"settimeofday":      unix.SYS_SETTIMEOFDAY,
	"clock_settime":     unix.SYS_CLOCK_SETTIME,
}

// Native is the filter's view of the architecture this program runs on.
func Native() (Arch, error) { return native(), nil }
