package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/batonhq/baton/internal/bounded"
	"github.com/batonhq/baton/sandbox/internal/seccomp"
	"github.com/batonhq/baton/sandbox/internal/stage"
)

// toolWait bounds each command a check runs: a hung tool is a failed
// check, not a hung doctor.
const toolWait = 10 * time.Second

// Doctor checks every prerequisite of the sandbox on this machine.
func Doctor(o DoctorOptions) []Check {
	return []Check{
		checkUserNS(),
		checkAppArmorUserNS(),
		checkKernelFeatures(),
		checkSeccomp(),
		checkPasta(),
		checkNft(),
		checkTun(o),
		checkCgroup(o),
		checkStateDir(o, os.Geteuid()),
		checkDisk(),
	}
}

// checkStateDir: a root worker's runs bind the baton binary it installs
// in <state-dir>/bin into the sandbox, which the sandbox's init opens as
// the sandbox uid; every directory above the state dir must let that uid
// search it. (The worker makes the state dir and its runs and bin
// directories searchable itself.)
func checkStateDir(o DoctorOptions, euid int) Check {
	c := Check{Name: "state dir"}
	if o.StateDir == "" {
		c.Severity, c.Detail = SevOK, "not checked (no --state-dir)"
		return c
	}
	if euid != 0 {
		c.Severity, c.Detail = SevOK, o.StateDir+": runs as your uid, which reaches it"
		return c
	}
	uid, gid := uint32(o.SandboxUID), uint32(o.SandboxUID)
	if uid == 0 {
		uid, gid = DefaultSandboxUID, DefaultSandboxGID
	}
	dir, err := filepath.Abs(o.StateDir)
	if err != nil {
		c.Severity, c.Detail = SevWarn, err.Error()
		return c
	}
	// From the deepest directory above it that exists, links resolved.
	p := filepath.Dir(dir)
	real, err := filepath.EvalSymlinks(p)
	for err != nil && p != "/" {
		p = filepath.Dir(p)
		real, err = filepath.EvalSymlinks(p)
	}
	if err != nil {
		c.Severity, c.Detail = SevWarn, err.Error()
		return c
	}
	for q := real; ; q = filepath.Dir(q) {
		var st unix.Stat_t
		if err := unix.Stat(q, &st); err != nil {
			c.Severity, c.Detail = SevWarn, fmt.Sprintf("stat %s: %v", q, err)
			return c
		}
		if !searchableBy(st.Mode&0o777, st.Uid, st.Gid, uid, gid) {
			c.Severity = SevWarn
			c.Detail = fmt.Sprintf("%s (mode %04o, owner %d) above the state dir %s cannot be searched by the sandbox uid %d:"+
				" runs of profiles that run {baton} fail (sandbox setup (host-sources): permission denied)", q, st.Mode&0o777, st.Uid, o.StateDir, uid)
			c.Fix = fmt.Sprintf("chmod o+x %s, or use a state dir under directories others may search (such as /var/lib/baton)", q)
			return c
		}
		if q == "/" {
			break
		}
	}
	c.Severity, c.Detail = SevOK, fmt.Sprintf("%s: every directory above it is searchable by the sandbox uid %d", o.StateDir, uid)
	return c
}

// checkDisk: a root worker gives each run's workspace a filesystem of
// limits.disk bytes, made with mkfs.ext4 on a loop device; without them no
// run of a root worker starts.
func checkDisk() Check {
	c := Check{Name: "disk bound"}
	if os.Geteuid() != 0 {
		c.Severity, c.Detail = SevWarn, "not root: limits.disk bounds each file the agent writes (fsize), not its workspace's total"
		c.Fix = "run the worker as root (it runs agents as an unprivileged uid)"
		return c
	}
	p, err := exec.LookPath("mkfs.ext4")
	if err != nil {
		c.Severity, c.Detail = SevFail, "mkfs.ext4 not found: a root worker cannot make a run's bounded workspace"
		c.Fix = "apt-get install e2fsprogs"
		return c
	}
	f, err := os.OpenFile("/dev/loop-control", os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		c.Severity, c.Detail = SevFail, "no loop devices ("+err.Error()+"): a root worker cannot make a run's bounded workspace"
		c.Fix = "modprobe loop (and, in a container, allow /dev/loop-control and /dev/loop*)"
		return c
	}
	f.Close()
	c.Severity, c.Detail = SevOK, p+" and loop devices: each workspace is a filesystem of limits.disk bytes"
	return c
}

func readTrim(path string) (string, error) {
	b, err := os.ReadFile(path)
	return strings.TrimSpace(string(b)), err
}

// checkUserNS really creates the namespaces: the sysctls alone do not
// tell whether a security module refuses them.
func checkUserNS() Check {
	c := Check{Name: "user namespaces"}
	if v, err := readTrim("/proc/sys/user/max_user_namespaces"); err == nil && v == "0" {
		c.Severity, c.Detail = SevFail, "user.max_user_namespaces is 0"
		c.Fix = "sysctl -w user.max_user_namespaces=15000 (and persist it in /etc/sysctl.d)"
		return c
	}
	if v, err := readTrim("/proc/sys/kernel/unprivileged_userns_clone"); err == nil && v == "0" {
		// A root runner drops to the sandbox uid before it creates them.
		c.Severity, c.Detail = SevFail, "kernel.unprivileged_userns_clone is 0: the runner creates the sandbox's namespaces as an unprivileged uid"
		c.Fix = "sysctl -w kernel.unprivileged_userns_clone=1 (and persist it in /etc/sysctl.d)"
		return c
	}
	cmd := exec.Command("/bin/true")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID | syscall.CLONE_NEWNET | syscall.CLONE_NEWNS | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS | syscall.CLONE_NEWCGROUP,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}},
	}
	if _, err := bounded.Output(context.Background(), toolWait, cmd); err != nil {
		c.Severity, c.Detail = SevFail, "cannot create user, pid, net, mount, ipc, uts and cgroup namespaces: "+err.Error()
		c.Fix = "enable unprivileged user namespaces (sysctl user.max_user_namespaces, kernel.unprivileged_userns_clone);" +
			" on Ubuntu 23.10+ install deploy/apparmor/baton; in a container, allow user namespaces in its seccomp profile"
		return c
	}
	c.Severity, c.Detail = SevOK, "user, pid, net, mount, ipc, uts and cgroup namespaces can be created"
	return c
}

// checkAppArmorUserNS: with kernel.apparmor_restrict_unprivileged_userns=1
// (Ubuntu 23.10+), a user namespace made by an unconfined program holds
// no capability, and the runner, even a root one, makes them as the
// sandbox uid. Baton's own profile (deploy/apparmor/baton) lifts it.
func checkAppArmorUserNS() Check {
	c := Check{Name: "AppArmor userns restriction"}
	v, err := readTrim("/proc/sys/kernel/apparmor_restrict_unprivileged_userns")
	if err != nil {
		c.Severity, c.Detail = SevOK, "not present on this kernel"
		return c
	}
	if v != "1" {
		c.Severity, c.Detail = SevOK, "kernel.apparmor_restrict_unprivileged_userns="+v
		return c
	}
	label, _ := readTrim("/proc/self/attr/apparmor/current")
	if label == "" {
		label, _ = readTrim("/proc/self/attr/current")
	}
	if strings.HasPrefix(label, "baton") {
		c.Severity, c.Detail = SevOK, "restricted, but baton runs under its own profile ("+label+")"
		return c
	}
	c.Severity = SevFail
	c.Detail = fmt.Sprintf("unprivileged user namespaces are restricted and baton runs %q, not under its profile: its sandboxes get no capabilities", label)
	c.Fix = "install deploy/apparmor/baton into /etc/apparmor.d (adjust the binary paths), then apparmor_parser -r /etc/apparmor.d/baton"
	return c
}

// checkKernelFeatures probes the calls the sandbox's layout needs:
// mount_setattr (5.12), which makes every bind read-only for real, and
// openat2 (5.6).
func checkKernelFeatures() Check {
	c := Check{Name: "kernel mount API"}
	var missing []string
	if err := unix.MountSetattr(-1, "", 0, &unix.MountAttr{}); errors.Is(err, unix.ENOSYS) {
		missing = append(missing, "mount_setattr")
	}
	if _, err := unix.Openat2(-1, "", &unix.OpenHow{}); errors.Is(err, unix.ENOSYS) {
		missing = append(missing, "openat2")
	}
	if len(missing) > 0 {
		c.Severity, c.Detail = SevFail, "the kernel lacks "+strings.Join(missing, ", ")
		c.Fix = "use Linux 5.12 or newer"
		return c
	}
	c.Severity, c.Detail = SevOK, "mount_setattr and openat2 are available"
	return c
}

func checkSeccomp() Check {
	c := Check{Name: "seccomp"}
	if _, err := unix.PrctlRetInt(unix.PR_GET_SECCOMP, 0, 0, 0, 0); err != nil {
		c.Severity, c.Detail = SevFail, "seccomp is not available: "+err.Error()
		c.Fix = "use a kernel built with CONFIG_SECCOMP_FILTER"
		return c
	}
	if acts, err := readTrim("/proc/sys/kernel/seccomp/actions_avail"); err == nil && !strings.Contains(acts, "errno") {
		c.Severity, c.Detail = SevFail, "seccomp cannot return errors: actions "+acts
		c.Fix = "use a kernel built with CONFIG_SECCOMP_FILTER"
		return c
	}
	a, err := seccomp.Native()
	if err != nil {
		c.Severity, c.Detail = SevFail, err.Error()
		c.Fix = "run baton on amd64 or arm64"
		return c
	}
	c.Severity, c.Detail = SevOK, "the agent's filter ("+a.Name+") denies new user namespaces, TIOCSTI, TIOCLINUX, foreign ABIs and "+a.DeniedNames()
	return c
}

// checkPasta: profiles with CIDR entries need pasta with every option
// the runner passes.
func checkPasta() Check {
	c := Check{Name: "pasta"}
	p, err := stage.LookTool("pasta")
	if err != nil {
		c.Severity, c.Detail = SevWarn, "not found: profiles whose network.allow lists CIDR entries cannot run"
		c.Fix = "apt-get install passt"
		return c
	}
	out, _ := bounded.Output(context.Background(), toolWait, exec.Command(p, "--help"))
	if lacks := missingFlags(string(out), stage.PastaFlags); len(lacks) > 0 {
		c.Severity, c.Detail = SevWarn, p+" lacks "+strings.Join(lacks, ", ")+": CIDR profiles cannot run"
		c.Fix = "install a newer passt"
		return c
	}
	c.Severity, c.Detail = SevOK, p+" (with "+strings.Join(stage.PastaFlags, " ")+")"
	return c
}

// checkNft installs a ruleset the way runner-inner does, in a user and
// network namespace of its own.
func checkNft() Check {
	c := Check{Name: "nft"}
	p, err := stage.LookTool("nft")
	if err != nil {
		c.Severity, c.Detail = SevWarn, "not found: profiles whose network.allow lists CIDR entries cannot run"
		c.Fix = "apt-get install nftables"
		return c
	}
	cmd := exec.Command(p, "-f", "-")
	cmd.Stdin = strings.NewReader(stage.NftRuleset(nil, nil))
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}},
	}
	if out, err := bounded.Output(context.Background(), toolWait, cmd); err != nil {
		c.Severity, c.Detail = SevWarn, fmt.Sprintf("%s cannot install a ruleset in a user namespace: %v: %s", p, err, strings.TrimSpace(string(out)))
		c.Fix = "load nf_tables (modprobe nf_tables) and allow user namespaces"
		return c
	}
	c.Severity, c.Detail = SevOK, p+" installs rulesets in a user namespace"
	return c
}

// checkTun: pasta opens /dev/net/tun as the (unprivileged) sandbox user.
func checkTun(o DoctorOptions) Check {
	c := Check{Name: "/dev/net/tun"}
	uid := uint32(os.Geteuid())
	if uid == 0 {
		uid = uint32(o.SandboxUID)
	}
	var st unix.Stat_t
	if err := unix.Stat("/dev/net/tun", &st); err != nil {
		c.Severity, c.Detail = SevWarn, "missing: profiles whose network.allow lists CIDR entries cannot run"
		c.Fix = "modprobe tun"
		return c
	}
	if !stage.TunUsableBy(st.Mode&0o777, st.Uid, uid) {
		c.Severity = SevWarn
		c.Detail = fmt.Sprintf("mode %04o owner %d: uid %d cannot open it, so pasta cannot start (CIDR profiles cannot run)", st.Mode&0o777, st.Uid, uid)
		c.Fix = "chmod 0666 /dev/net/tun (the usual default; persist with a udev rule: KERNEL==\"tun\", MODE=\"0666\")"
		return c
	}
	c.Severity, c.Detail = SevOK, fmt.Sprintf("usable by uid %d", uid)
	return c
}

func checkCgroup(o DoctorOptions) Check {
	c := Check{Name: "cgroup v2 delegation"}
	var fs unix.Statfs_t
	v2 := unix.Statfs("/sys/fs/cgroup", &fs) == nil && fs.Type == unix.CGROUP2_SUPER_MAGIC
	switch {
	case o.CgroupParent != "":
		if err := stage.CheckCgroupParent(o.CgroupParent, []string{"cpu", "memory", "pids"}); err != nil {
			c.Severity, c.Detail = SevWarn, err.Error()+": profiles that set limits.memory or limits.cpus cannot run"
			c.Fix = "point cgroupParent at a delegated cgroup v2 directory (systemd: Delegate=yes) with +memory +pids +cpu in its cgroup.subtree_control"
			return c
		}
		if err := unix.Access(o.CgroupParent, unix.W_OK); err != nil {
			c.Severity, c.Detail = SevWarn, fmt.Sprintf("cgroupParent %s is not writable: %v", o.CgroupParent, err)
			c.Fix = "delegate it to the worker's uid (systemd: Delegate=yes)"
			return c
		}
		c.Severity, c.Detail = SevOK, "runs get memory, pids and cpu limits under "+o.CgroupParent
	case !v2:
		c.Severity = SevWarn
		c.Detail = "cgroup v2 is not mounted at /sys/fs/cgroup (cgroup v1 or hybrid): profiles that set limits.memory or limits.cpus cannot run; limits.pids still holds (RLIMIT_NPROC in each run's user namespace)"
		c.Fix = "boot with systemd.unified_cgroup_hierarchy=1, run the worker with Delegate=yes, and set cgroupParent"
	default:
		c.Severity = SevWarn
		c.Detail = "cgroup v2, but no cgroupParent configured: profiles that set limits.memory or limits.cpus cannot run; limits.pids still holds (RLIMIT_NPROC)"
		c.Fix = "run the worker with systemd Delegate=yes and set cgroupParent to a leaf of its delegated cgroup"
	}
	return c
}

// missingFlags lists the flags a --help text does not mention.
func missingFlags(help string, flags []string) []string {
	var out []string
	for _, f := range flags {
		if !containsWord(help, f) {
			out = append(out, f)
		}
	}
	return out
}

func containsWord(s, w string) bool {
	for i := strings.Index(s, w); i >= 0; {
		end := i + len(w)
		if end == len(s) || !isFlagChar(s[end]) {
			return true
		}
		next := strings.Index(s[end:], w)
		if next < 0 {
			return false
		}
		i = end + next
	}
	return false
}

func isFlagChar(b byte) bool {
	return b == '-' || b >= 'a' && b <= 'z' || b >= '0' && b <= '9'
}
