// Package seccomp owns the agent's seccomp filter: a deny list compiled
// to classic BPF by hand, and its loader.
//
// The filter returns EPERM for the syscalls an agent has no business
// making and that widen the kernel surface it can reach (ptrace and
// process_vm_*, io_uring, bpf, perf_event_open, the keyring, userfaultfd,
// every mount call, kexec, module loading, setns), for clone and unshare
// asking for a new user namespace, and for ioctl TIOCSTI and TIOCLINUX
// (terminal input injection); clone3, whose flags a filter cannot read,
// fails with ENOSYS so libc falls back to clone. A syscall of another
// architecture (x86 int 0x80, x32) fails with ENOSYS: a deny list that let
// a foreign ABI through would deny nothing.
//
// It is written by hand rather than with elastic/go-seccomp-bpf because
// that library compares ioctl arguments on 64 bits, which the high-bits
// TIOCSTI bypass (CVE-2019-10063) defeats, and lets a foreign
// architecture's syscalls take the default action, which for a deny list
// is "allow"; the program here is small enough to read whole.
package seccomp
