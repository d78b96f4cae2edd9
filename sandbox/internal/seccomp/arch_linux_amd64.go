package seccomp

import (
	"maps"

	"golang.org/x/sys/unix"
)

func native() Arch {
	denied := maps.Clone(commonDenied)
	denied["iopl"] = unix.SYS_IOPL
	denied["ioperm"] = unix.SYS_IOPERM
	denied["modify_ldt"] = unix.SYS_MODIFY_LDT
	denied["uselib"] = unix.SYS_USELIB
	return Arch{
		Name:      "amd64",
		AuditArch: unix.AUDIT_ARCH_X86_64,
		SubABI:    0x40000000, // __X32_SYSCALL_BIT
		Denied:    denied,
		Clone:     unix.SYS_CLONE,
		Unshare:   unix.SYS_UNSHARE,
		Ioctl:     unix.SYS_IOCTL,
		Clone3:    unix.SYS_CLONE3,
	}
}
