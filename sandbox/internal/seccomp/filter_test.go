package seccomp

import (
	"encoding/binary"
	"testing"
)

// data is a struct seccomp_data.
type data struct {
	nr   uint32
	arch uint32
	args [6]uint64
}

func (d data) bytes() []byte {
	b := make([]byte, 64)
	binary.LittleEndian.PutUint32(b[0:], d.nr)
	binary.LittleEndian.PutUint32(b[4:], d.arch)
	for i, a := range d.args {
		binary.LittleEndian.PutUint64(b[16+8*i:], a)
	}
	return b
}

// run interprets the instructions Build emits, as the kernel would.
func run(t *testing.T, prog []Instruction, d data) uint32 {
	t.Helper()
	mem := d.bytes()
	var acc uint32
	for pc := 0; pc < len(prog); pc++ {
		in := prog[pc]
		switch in.Code {
		case bpfLdWAbs:
			if in.K%4 != 0 || int(in.K)+4 > len(mem) {
				t.Fatalf("pc %d: load at %d", pc, in.K)
			}
			acc = binary.LittleEndian.Uint32(mem[in.K:])
		case bpfJeqK, bpfJgeK, bpfJsetK:
			var taken bool
			switch in.Code {
			case bpfJeqK:
				taken = acc == in.K
			case bpfJgeK:
				taken = acc >= in.K
			default:
				taken = acc&in.K != 0
			}
			if taken {
				pc += int(in.Jt)
			} else {
				pc += int(in.Jf)
			}
			if pc+1 >= len(prog) {
				t.Fatalf("pc %d jumps past the end", pc)
			}
		case bpfRetK:
			return in.K
		default:
			t.Fatalf("pc %d: unknown opcode %#x", pc, in.Code)
		}
	}
	t.Fatal("program ran off its end without returning")
	return 0
}

func testArch() Arch {
	return Arch{
		Name: "test", AuditArch: 0xc000003e, SubABI: 0x40000000,
		Denied: map[string]uint32{"ptrace": 101, "mount": 165, "io_uring_setup": 425, "bpf": 321},
		Clone:  56, Unshare: 272, Ioctl: 16, Clone3: 435,
	}
}

func TestBuild(t *testing.T) {
	a := testArch()
	prog, err := Build(a)
	if err != nil {
		t.Fatal(err)
	}
	const arch = 0xc000003e
	cases := []struct {
		name string
		d    data
		want uint32
	}{
		{"read", data{nr: 0, arch: arch}, RetAllow},
		{"getpid", data{nr: 39, arch: arch}, RetAllow},
		{"ptrace", data{nr: 101, arch: arch}, RetEPERM},
		{"mount", data{nr: 165, arch: arch}, RetEPERM},
		{"io_uring_setup", data{nr: 425, arch: arch}, RetEPERM},
		{"bpf", data{nr: 321, arch: arch}, RetEPERM},
		{"foreign arch read", data{nr: 0, arch: 0x40000003}, RetENOSYS},
		{"foreign arch ptrace number", data{nr: 26, arch: 0x40000003}, RetENOSYS},
		{"x32 read", data{nr: 0x40000000, arch: arch}, RetENOSYS},
		{"x32 ptrace", data{nr: 0x40000000 | 521, arch: arch}, RetENOSYS},
		{"clone thread", data{nr: 56, arch: arch, args: [6]uint64{0x3d0f00}}, RetAllow},
		{"clone newuser", data{nr: 56, arch: arch, args: [6]uint64{0x10000000 | 0x11}}, RetEPERM},
		{"clone newuser among flags", data{nr: 56, arch: arch, args: [6]uint64{0xffffffff}}, RetEPERM},
		{"clone high bits only", data{nr: 56, arch: arch, args: [6]uint64{0x10000000 << 32}}, RetAllow},
		{"unshare newns", data{nr: 272, arch: arch, args: [6]uint64{0x20000}}, RetAllow},
		{"unshare newuser", data{nr: 272, arch: arch, args: [6]uint64{0x10000000}}, RetEPERM},
		{"clone3", data{nr: 435, arch: arch}, RetENOSYS},
		{"ioctl TCGETS", data{nr: 16, arch: arch, args: [6]uint64{1, 0x5401}}, RetAllow},
		{"ioctl TIOCSTI", data{nr: 16, arch: arch, args: [6]uint64{0, 0x5412}}, RetEPERM},
		{"ioctl TIOCSTI high bits (CVE-2019-10063)", data{nr: 16, arch: arch, args: [6]uint64{0, 0xdead00000000 | 0x5412}}, RetEPERM},
		{"ioctl TIOCLINUX", data{nr: 16, arch: arch, args: [6]uint64{0, 0x541c}}, RetEPERM},
		{"ioctl TIOCSTI in argument 0", data{nr: 16, arch: arch, args: [6]uint64{0x5412, 0x5401}}, RetAllow},
	}
	for _, c := range cases {
		if got := run(t, prog, c.d); got != c.want {
			t.Errorf("%s: filter returns %#x, want %#x", c.name, got, c.want)
		}
	}
	again, _ := Build(a)
	if len(again) != len(prog) {
		t.Fatal("Build is not deterministic")
	}
	for i := range prog {
		if prog[i] != again[i] {
			t.Fatalf("Build is not deterministic at %d", i)
		}
	}
}

func TestBuildWithoutSubABI(t *testing.T) {
	a := testArch()
	a.SubABI = 0
	prog, err := Build(a)
	if err != nil {
		t.Fatal(err)
	}
	if got := run(t, prog, data{nr: 0x40000000, arch: a.AuditArch}); got != RetAllow {
		t.Errorf("without a sub-ABI a high number is an ordinary one: %#x", got)
	}
}

func TestBuildRefusesIncompleteArch(t *testing.T) {
	for name, mutate := range map[string]func(*Arch){
		"no arch":    func(a *Arch) { a.AuditArch = 0 },
		"no denied":  func(a *Arch) { a.Denied = nil },
		"no clone":   func(a *Arch) { a.Clone = 0 },
		"no ioctl":   func(a *Arch) { a.Ioctl = 0 },
		"no clone3":  func(a *Arch) { a.Clone3 = 0 },
		"no unshare": func(a *Arch) { a.Unshare = 0 },
	} {
		a := testArch()
		mutate(&a)
		if _, err := Build(a); err == nil {
			t.Errorf("%s: Build succeeded", name)
		}
	}
}

func TestNativeDeniesThePolicy(t *testing.T) {
	a, err := Native()
	if err != nil {
		t.Fatal(err)
	}
	prog, err := Build(a)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"ptrace", "process_vm_readv", "process_vm_writev", "io_uring_setup", "io_uring_enter",
		"io_uring_register", "bpf", "perf_event_open", "add_key", "request_key", "keyctl", "userfaultfd", "mount",
		"umount2", "pivot_root", "fsopen", "fsmount", "move_mount", "open_tree", "mount_setattr", "kexec_load",
		"kexec_file_load", "init_module", "finit_module", "delete_module", "setns"} {
		nr, ok := a.Denied[name]
		if !ok {
			t.Errorf("%s is not denied", name)
			continue
		}
		if got := run(t, prog, data{nr: nr, arch: a.AuditArch}); got != RetEPERM {
			t.Errorf("%s: %#x, want EPERM", name, got)
		}
	}
}
