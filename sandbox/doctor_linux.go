package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Doctor checks every prerequisite of the sandbox on this machine.
func Doctor(o DoctorOptions) []Check {
	return []Check{
		checkUserNS(),
		checkAppArmorUserNS(),
		checkSeccomp(),
		checkTool("pasta", "passt", "network allowlists (profile network.allow) need pasta"),
		checkTool("nft", "nftables", "network allowlists need nft for the egress ruleset"),
		checkTun(o),
		checkCgroup(),
	}
}

func readTrim(path string) (string, error) {
	b, err := os.ReadFile(path)
	return strings.TrimSpace(string(b)), err
}

// checkUserNS really creates a user namespace: the sysctls alone do not
// tell whether a security module refuses it.
func checkUserNS() Check {
	c := Check{Name: "user namespaces"}
	if v, err := readTrim("/proc/sys/user/max_user_namespaces"); err == nil && v == "0" {
		c.Severity, c.Detail = SevFail, "user.max_user_namespaces is 0"
		c.Fix = "sysctl -w user.max_user_namespaces=15000 (and persist it in /etc/sysctl.d)"
		return c
	}
	cmd := exec.Command("/bin/true")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID | syscall.CLONE_NEWNET | syscall.CLONE_NEWNS | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}},
	}
	if err := cmd.Run(); err != nil {
		c.Severity, c.Detail = SevFail, "cannot create user+pid+net+mount namespaces: "+err.Error()
		c.Fix = "enable unprivileged user namespaces: sysctl -w kernel.unprivileged_userns_clone=1; on Ubuntu 23.10+ load deploy/apparmor/baton (see README)"
		return c
	}
	c.Severity, c.Detail = SevOK, "user, pid, net, mount, ipc and uts namespaces can be created"
	return c
}

func checkAppArmorUserNS() Check {
	c := Check{Name: "AppArmor userns restriction"}
	v, err := readTrim("/proc/sys/kernel/apparmor_restrict_unprivileged_userns")
	switch {
	case err != nil:
		c.Severity, c.Detail = SevOK, "not present on this kernel"
	case v == "1" && os.Geteuid() != 0:
		c.Severity, c.Detail = SevWarn, "unprivileged user namespaces are restricted by AppArmor"
		c.Fix = "install deploy/apparmor/baton into /etc/apparmor.d and run apparmor_parser -r /etc/apparmor.d/baton"
	default:
		c.Severity, c.Detail = SevOK, "kernel.apparmor_restrict_unprivileged_userns="+v
	}
	return c
}

func checkSeccomp() Check {
	c := Check{Name: "seccomp"}
	if _, err := unix.PrctlRetInt(unix.PR_GET_SECCOMP, 0, 0, 0, 0); err != nil {
		c.Severity, c.Detail = SevWarn, "seccomp is not available: "+err.Error()
		c.Fix = "use a kernel built with CONFIG_SECCOMP_FILTER"
		return c
	}
	c.Severity, c.Detail = SevOK, "seccomp filters are supported"
	return c
}

func checkTool(name, pkg, why string) Check {
	c := Check{Name: name}
	p, err := exec.LookPath(name)
	if err != nil {
		c.Severity, c.Detail = SevWarn, name+" not found: "+why
		c.Fix = "apt-get install " + pkg
		return c
	}
	c.Severity, c.Detail = SevOK, p
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
		c.Severity, c.Detail = SevWarn, "missing: network allowlists need it"
		c.Fix = "modprobe tun"
		return c
	}
	if !tunUsableBy(st.Mode&0o777, st.Uid, uid) {
		c.Severity = SevWarn
		c.Detail = fmt.Sprintf("mode %04o owner %d: uid %d cannot open it, so pasta cannot start", st.Mode&0o777, st.Uid, uid)
		c.Fix = "chmod 0666 /dev/net/tun (the usual default; persist with a udev rule: KERNEL==\"tun\", MODE=\"0666\")"
		return c
	}
	c.Severity, c.Detail = SevOK, fmt.Sprintf("usable by uid %d", uid)
	return c
}

func checkCgroup() Check {
	c := Check{Name: "cgroup v2 delegation"}
	ctrl, err := readTrim("/sys/fs/cgroup/cgroup.controllers")
	if err != nil {
		c.Severity = SevWarn
		c.Detail = "cgroup v2 is not mounted at /sys/fs/cgroup (cgroup v1 or hybrid): per-run memory, pids and cpu limits cannot apply; rlimits still do"
		c.Fix = "boot with systemd.unified_cgroup_hierarchy=1 and run the worker with Delegate=yes (deploy/baton-worker.service)"
		return c
	}
	have := parseCgroupControllers(ctrl)
	var missing []string
	for _, k := range []string{"memory", "pids", "cpu"} {
		if !have[k] {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		c.Severity = SevWarn
		c.Detail = "cgroup v2 controllers not delegated: " + strings.Join(missing, ", ")
		c.Fix = "run the worker under systemd with Delegate=memory pids cpu"
		return c
	}
	c.Severity, c.Detail = SevOK, "memory, pids, cpu: "+strconv.Quote(ctrl)
	return c
}
