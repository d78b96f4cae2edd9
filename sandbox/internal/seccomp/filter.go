package seccomp

import (
	"fmt"
	"slices"
	"strings"
)

// Instruction is one classic BPF instruction (struct sock_filter).
type Instruction struct {
	Code   uint16
	Jt, Jf uint8
	K      uint32
}

// Classic BPF opcodes the filter uses (linux/bpf_common.h).
const (
	bpfLdWAbs  = 0x00 | 0x00 | 0x20 // BPF_LD | BPF_W | BPF_ABS
	bpfJeqK    = 0x05 | 0x10 | 0x00 // BPF_JMP | BPF_JEQ | BPF_K
	bpfJgeK    = 0x05 | 0x30 | 0x00 // BPF_JMP | BPF_JGE | BPF_K
	bpfJsetK   = 0x05 | 0x40 | 0x00 // BPF_JMP | BPF_JSET | BPF_K
	bpfRetK    = 0x06 | 0x00        // BPF_RET | BPF_K
	offsetNr   = 0                  // struct seccomp_data.nr
	offsetArch = 4                  // struct seccomp_data.arch
	offsetArgs = 16                 // struct seccomp_data.args[0]
)

// Return values (linux/seccomp.h) and errnos.
const (
	RetAllow = 0x7fff0000
	retErrno = 0x00050000
	ePERM    = 1
	eNOSYS   = 38
	// RetEPERM and RetENOSYS are what denied calls return.
	RetEPERM  = retErrno | ePERM
	RetENOSYS = retErrno | eNOSYS
)

// Argument values the filter inspects.
const (
	cloneNewUser = 0x10000000 // CLONE_NEWUSER
	tiocsti      = 0x5412     // TIOCSTI: push a byte into a terminal's input
	tioclinux    = 0x541c     // TIOCLINUX: console selection paste, among others
)

// Arch is an architecture's view of the filter: its audit arch, the
// numbers of the calls the filter handles, and the lowest number of a
// sub-ABI to refuse (x32 on amd64; 0 for none).
type Arch struct {
	Name      string
	AuditArch uint32
	SubABI    uint32
	// Denied maps each denied syscall's name to its number.
	Denied map[string]uint32
	// Clone, Unshare, Ioctl and Clone3 are inspected by argument.
	Clone, Unshare, Ioctl, Clone3 uint32
}

// Build compiles the policy for a. Denied calls are checked in name order,
// so a given Arch always yields the same program.
func Build(a Arch) ([]Instruction, error) {
	if a.AuditArch == 0 || len(a.Denied) == 0 || a.Clone == 0 || a.Unshare == 0 || a.Ioctl == 0 || a.Clone3 == 0 {
		return nil, fmt.Errorf("seccomp: incomplete architecture %q", a.Name)
	}
	p := []Instruction{
		{Code: bpfLdWAbs, K: offsetArch},
		{Code: bpfJeqK, Jt: 1, K: a.AuditArch},
		{Code: bpfRetK, K: RetENOSYS},
		{Code: bpfLdWAbs, K: offsetNr},
	}
	if a.SubABI != 0 {
		p = append(p, Instruction{Code: bpfJgeK, Jf: 1, K: a.SubABI}, Instruction{Code: bpfRetK, K: RetENOSYS})
	}
	for _, name := range sortedNames(a.Denied) {
		p = append(p, Instruction{Code: bpfJeqK, Jf: 1, K: a.Denied[name]}, Instruction{Code: bpfRetK, K: RetEPERM})
	}
	p = append(p, Instruction{Code: bpfJeqK, Jf: 1, K: a.Clone3}, Instruction{Code: bpfRetK, K: RetENOSYS})
	// clone and unshare: EPERM when flags (argument 0, low word) ask for a
	// user namespace.
	for _, nr := range []uint32{a.Clone, a.Unshare} {
		p = append(p,
			Instruction{Code: bpfJeqK, Jf: 4, K: nr},
			Instruction{Code: bpfLdWAbs, K: offsetArgs},
			Instruction{Code: bpfJsetK, Jf: 1, K: cloneNewUser},
			Instruction{Code: bpfRetK, K: RetEPERM},
			Instruction{Code: bpfRetK, K: RetAllow},
		)
	}
	// ioctl: the kernel takes the command as an unsigned int, so only the
	// low word of argument 1 counts (CVE-2019-10063).
	p = append(p,
		Instruction{Code: bpfJeqK, Jf: 5, K: a.Ioctl},
		Instruction{Code: bpfLdWAbs, K: offsetArgs + 8},
		Instruction{Code: bpfJeqK, Jt: 2, K: tiocsti},
		Instruction{Code: bpfJeqK, Jt: 1, K: tioclinux},
		Instruction{Code: bpfRetK, K: RetAllow},
		Instruction{Code: bpfRetK, K: RetEPERM},
		Instruction{Code: bpfRetK, K: RetAllow},
	)
	if len(p) > 4096 { // BPF_MAXINSNS
		return nil, fmt.Errorf("seccomp: program of %d instructions is too long", len(p))
	}
	return p, nil
}

// DeniedNames lists the calls a filter for a denies outright, for
// diagnostics.
func (a Arch) DeniedNames() string { return strings.Join(sortedNames(a.Denied), " ") }

func sortedNames(m map[string]uint32) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
