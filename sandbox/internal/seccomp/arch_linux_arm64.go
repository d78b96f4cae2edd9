package seccomp

import (
	"maps"

	"golang.org/x/sys/unix"
)

func native() Arch {
	return Arch{
		Name:      "arm64",
		AuditArch: unix.AUDIT_ARCH_AARCH64,
		Denied:    maps.Clone(commonDenied),
		Clone:     unix.SYS_CLONE,
		Unshare:   unix.SYS_UNSHARE,
		Ioctl:     unix.SYS_IOCTL,
		Clone3:    unix.SYS_CLONE3,
	}
}
