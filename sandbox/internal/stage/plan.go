package stage

import (
	"fmt"
	"maps"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/batonhq/baton/sandbox/internal/chain"
	"github.com/batonhq/baton/sandbox/runspec"
)

// innerSpec is what runner-outer hands runner-inner: the child's spec and
// the network runner-inner sets up. It holds no nonce.
type innerSpec struct {
	Child childSpec `json:"child"`
	Net   netPlan   `json:"net"`
	// Tools: runner-inner makes the tools socket (mcp.SocketAddr) in the
	// sandbox's network namespace and hands it to runner-outer.
	Tools bool `json:"tools,omitempty"`
}

// netPlan is runner-inner's part of the network.
type netPlan struct {
	Mode string `json:"mode"`
	// Nft is the nft binary and Ruleset its input, for chain.NetPasta.
	Nft     string `json:"nft,omitempty"`
	Ruleset string `json:"ruleset,omitempty"`
}

// childSpec is what runner-inner hands runner-inner-child: how to build
// the agent's root and start it.
type childSpec struct {
	RunDir   string   `json:"runDir"`
	Argv     []string `json:"argv"`
	Env      []string `json:"env"`
	AgentUID int      `json:"agentUid"`
	AgentGID int      `json:"agentGid"`
	// Mounts are the profile's, sources resolved on the host.
	Mounts []bindMount `json:"mounts,omitempty"`
	// Binary is where the baton binary is bound read-only, when the agent
	// is it; empty otherwise. BinaryDev and BinaryIno are the file's
	// identity as runner-outer found it, checked again where it is bound.
	Binary    string `json:"binary,omitempty"`
	BinaryDev uint64 `json:"binaryDev,omitempty"`
	BinaryIno uint64 `json:"binaryIno,omitempty"`
	// Etc are the generated files of the agent's /etc, by name.
	Etc map[string]string `json:"etc"`
	// TmpBytes sizes /tmp; ShmBytes /dev/shm.
	TmpBytes uint64   `json:"tmpBytes"`
	ShmBytes uint64   `json:"shmBytes"`
	Rlimits  []rlimit `json:"rlimits"`
	// Pooled: Argv and Env are empty, and come with the take on the
	// control pipe (sandbox.Prestart).
	Pooled bool `json:"pooled,omitempty"`
	// Home: the sandbox's cwd is the run's agent directory, whose
	// workspace and home are bound at runspec.WorkspacePath and HomePath;
	// else it is the workspace of a run directory made before homes, and
	// the agent's HOME is its workspace.
	Home bool `json:"home,omitempty"`
	// Git is cloned into the workspace by the exec stage before the
	// agent (never with Pooled).
	Git *runspec.Git `json:"git,omitempty"`
}

// defaultHome is the agent's HOME when its profile sets none.
func defaultHome(home bool) string {
	if home {
		return runspec.HomePath
	}
	return runspec.WorkspacePath
}

// bindMount is a profile mount whose source runner-outer resolved.
type bindMount struct {
	Source   string `json:"source"`
	Dest     string `json:"dest"`
	Writable bool   `json:"writable,omitempty"`
	// Dev and Ino identify the source runner-outer checked, so a path
	// swapped for another before the child opens it is refused.
	Dev uint64 `json:"dev"`
	Ino uint64 `json:"ino"`
}

// rlimit is one resource limit, soft = hard.
type rlimit struct {
	Name  string `json:"name"`
	Value uint64 `json:"value"`
}

// execSpec is what runner-inner-child hands the exec stage.
type execSpec struct {
	Path    string   `json:"path"`
	Argv    []string `json:"argv"`
	Env     []string `json:"env"`
	Dir     string   `json:"dir"`
	Rlimits []rlimit `json:"rlimits"`
	// Git is cloned into Dir before the exec (see cloneWorkspace).
	Git *runspec.Git `json:"git,omitempty"`
}

// maxShmBytes bounds /dev/shm, whatever limits.tmp is.
const maxShmBytes = 64 << 20

// rlimitsFor are the agent's limits: the profile's rlimits, nproc from
// Pids (the smaller wins when both are set), no core files unless the
// profile asks, since they would land in the workspace, and files no
// larger than limits.disk unless the profile sets fsize (the whole bound
// when a non-root worker cannot give the workspace its own filesystem).
func rlimitsFor(l runspec.Limits) []rlimit {
	m := map[string]uint64{"core": 0, "fsize": l.DiskBytes()}
	for n, v := range l.Rlimits {
		m[n] = uint64(v)
	}
	pids := uint64(l.Pids)
	if pids == 0 {
		pids = runspec.DefaultPids
	}
	if v, ok := m["nproc"]; !ok || pids < v {
		m["nproc"] = pids
	}
	out := make([]rlimit, 0, len(m))
	for _, n := range slices.Sorted(maps.Keys(m)) {
		out = append(out, rlimit{Name: n, Value: m[n]})
	}
	return out
}

// tmpSizes are the sizes of /tmp and /dev/shm.
func tmpSizes(l runspec.Limits) (tmp, shm uint64) {
	tmp = uint64(l.Tmp)
	if tmp == 0 {
		tmp = runspec.DefaultTmpBytes
	}
	return tmp, min(tmp, maxShmBytes)
}

// agentName is the agent's user and group name in its /etc.
const agentName = "agent"

// etcFiles generates the agent's /etc: its user and group, the sandbox's
// host name, and a resolver that asks the DNS stub (or, with no network,
// nobody).
func etcFiles(uid, gid int, home string, mode string) map[string]string {
	var passwd, group strings.Builder
	fmt.Fprintf(&passwd, "root:x:0:0:root:/root:/usr/sbin/nologin\n")
	fmt.Fprintf(&group, "root:x:0:\n")
	if uid != 0 {
		fmt.Fprintf(&passwd, "%s:x:%d:%d:baton agent:%s:/bin/sh\n", agentName, uid, gid, home)
	}
	if gid != 0 {
		fmt.Fprintf(&group, "%s:x:%d:\n", agentName, gid)
	}
	if uid != 65534 {
		passwd.WriteString("nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")
	}
	if gid != 65534 {
		group.WriteString("nogroup:x:65534:\n")
	}
	resolv := "# baton sandbox: no network\n"
	if mode != chain.NetNone {
		resolv = "# baton sandbox: the DNS stub answers allowlisted names only\nnameserver " + chain.DNSServer + "\n"
	}
	return map[string]string{
		"passwd":        passwd.String(),
		"group":         group.String(),
		"hostname":      sandboxHostname + "\n",
		"hosts":         "127.0.0.1\tlocalhost\n127.0.1.1\t" + sandboxHostname + "\n::1\tlocalhost ip6-localhost ip6-loopback\n",
		"resolv.conf":   resolv,
		"nsswitch.conf": "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\nnetworks: files\nprotocols: files\nservices: files\n",
	}
}

// hostEtc are the host's /etc entries the agent sees, read-only: what the
// dynamic linker, TLS (CA certificates), time zones and the usual tools
// need, and nothing that holds a secret.
var hostEtc = []string{
	"alternatives", "bash.bashrc", "ca-certificates", "ca-certificates.conf", "crypto-policies", "debian_version",
	"gai.conf", "host.conf", "inputrc", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "lsb-release",
	"mime.types", "os-release", "pki", "profile", "protocols", "services", "shells", "ssl/certs", "ssl/openssl.cnf",
	"terminfo", "timezone",
}

// systemDirs are bound read-only (or recreated, when symlinks) at their
// own paths.
var systemDirs = runspec.SystemDirs()

// checkDests refuses mounts whose targets would hide or land in the
// workspace or the home, collide with each other, with the baton
// binary's bind or with the sandbox's own /etc files, or hide the binary.
func checkDests(mounts []bindMount, binary string) error {
	taken := []string{runspec.WorkspacePath, runspec.HomePath}
	if binary != "" {
		taken = append(taken, binary)
	}
	for name := range etcFiles(1, 1, "/", chain.NetNone) {
		taken = append(taken, "/etc/"+name)
	}
	for _, name := range hostEtc {
		taken = append(taken, "/etc/"+name)
	}
	taken = append(taken, "/etc/"+chain.CAFile, "/etc/"+chain.CABundleFile)
	seen := map[string]bool{}
	for _, m := range mounts {
		for _, t := range taken {
			if m.Dest == t || strings.HasPrefix(t, m.Dest+"/") || strings.HasPrefix(m.Dest, t+"/") {
				return fmt.Errorf("mount %s -> %s overlaps %s, which the sandbox provides", m.Source, m.Dest, t)
			}
		}
		if seen[m.Dest] {
			return fmt.Errorf("two mounts land on %s", m.Dest)
		}
		seen[m.Dest] = true
	}
	return nil
}

// underOrAbove reports whether p is dir, inside it, or one of its
// ancestors: a mount source that would expose dir.
func underOrAbove(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+"/") || strings.HasPrefix(dir, p+"/") || p == "/"
}

// NftRuleset is the egress filter of a pasta network: output is dropped
// except on loopback (the proxy and DNS stub) and to the allowlist's CIDR
// entries, never to the host's own addresses. One table, installed by
// one `nft -f -` transaction.
func NftRuleset(prefixes []netip.Prefix, host []netip.Addr) string {
	var v4, v6, h4, h6 []string
	for _, p := range prefixes {
		if p.Addr().Is4() {
			v4 = append(v4, p.String())
		} else {
			v6 = append(v6, p.String())
		}
	}
	for _, a := range host {
		a = a.Unmap().WithZone("")
		if a.IsLoopback() {
			continue // loopback never leaves the namespace
		}
		if a.Is4() {
			h4 = append(h4, a.String())
		} else {
			h6 = append(h6, a.String())
		}
	}
	var b strings.Builder
	b.WriteString("table inet baton {\n\tchain output {\n\t\ttype filter hook output priority filter; policy drop;\n")
	b.WriteString("\t\toifname \"lo\" accept\n")
	set := func(family string, elems []string, verdict string) {
		if len(elems) > 0 {
			fmt.Fprintf(&b, "\t\t%s daddr { %s } %s\n", family, strings.Join(elems, ", "), verdict)
		}
	}
	set("ip", h4, "drop")
	set("ip6", h6, "drop")
	if len(v6) > 0 {
		// Neighbour discovery, so IPv6 reaches the gateway at all.
		b.WriteString("\t\tip6 daddr { fe80::/10, ff02::/16 } icmpv6 type { nd-neighbor-solicit, nd-router-solicit } accept\n")
	}
	set("ip", v4, "accept")
	set("ip6", v6, "accept")
	b.WriteString("\t}\n}\n")
	return b.String()
}

// pastaArgs attaches pasta to the network namespace of pid, with nothing
// forwarded either way (-t/-u/-T/-U none), no gateway mapped to the
// host's loopback (--no-map-gw), and none of its DHCP, DHCPv6 or router
// advertisement servers: it configures the tap itself (--config-net).
func pastaArgs(pid int) []string {
	return []string{
		"--config-net", "--foreground", "--quiet",
		"-t", "none", "-u", "none", "-T", "none", "-U", "none",
		"--no-map-gw", "--no-dhcp", "--no-dhcpv6", "--no-ra",
		strconv.Itoa(pid),
	}
}

// TunUsableBy reports whether a character device of mode perm owned by
// owner can be opened read-write by uid.
func TunUsableBy(perm uint32, owner, uid uint32) bool {
	if uid == 0 {
		return true
	}
	if owner == uid {
		return perm&0o600 == 0o600
	}
	return perm&0o006 == 0o006
}

// PastaFlags are the options pastaArgs needs; doctor checks pasta's help
// names each.
var PastaFlags = []string{"--config-net", "--foreground", "--quiet", "--tcp-ports", "--udp-ports", "--tcp-ns", "--udp-ns", "--no-map-gw", "--no-dhcp", "--no-dhcpv6", "--no-ra"}

// validate refuses a child spec runner-outer would not write.
func (c childSpec) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: child spec: "+format, append([]any{runspec.ErrInvalidSpec}, args...)...)
	}
	if err := runspec.ValidateRunDir(c.RunDir); err != nil {
		return err
	}
	if c.Pooled && (len(c.Argv) > 0 || len(c.Env) > 0 || c.Git != nil) {
		return bad("a pooled chain's argv and environment come with its take, and it clones no repository")
	}
	if c.Git != nil {
		if err := c.Git.Validate(c.Env); err != nil {
			return err
		}
	}
	if !c.Pooled {
		if err := runspec.ValidateArgv(c.Argv); err != nil {
			return err
		}
	}
	if err := runspec.ValidateEnv(c.Env); err != nil {
		return err
	}
	if c.AgentUID <= 0 || c.AgentUID > runspec.MaxID || c.AgentGID <= 0 || c.AgentGID > runspec.MaxID {
		return bad("agent ids %d/%d", c.AgentUID, c.AgentGID)
	}
	if c.Binary != "" && !runspec.CleanAbs(c.Binary) {
		return bad("binary %q", c.Binary)
	}
	for _, m := range c.Mounts {
		if !runspec.CleanAbs(m.Source) || !runspec.CleanAbs(m.Dest) || m.Dest == "/" {
			return bad("mount %q -> %q", m.Source, m.Dest)
		}
	}
	for name := range c.Etc {
		if !filepath.IsLocal(name) || strings.Contains(name, "/") {
			return bad("etc file %q", name)
		}
	}
	if c.TmpBytes == 0 || c.ShmBytes == 0 {
		return bad("no size for /tmp or /dev/shm")
	}
	for _, r := range c.Rlimits {
		if !slices.Contains(runspec.RlimitNames, r.Name) {
			return bad("rlimit %q", r.Name)
		}
	}
	return nil
}

func decodeChildSpec(b []byte) (childSpec, error) {
	var c childSpec
	if err := runspec.DecodeStrict(b, &c); err != nil {
		return childSpec{}, fmt.Errorf("%w: %w", runspec.ErrInvalidSpec, err)
	}
	return c, c.validate()
}

func decodeExecSpec(b []byte) (execSpec, error) {
	var e execSpec
	if err := runspec.DecodeStrict(b, &e); err != nil {
		return execSpec{}, fmt.Errorf("%w: %w", runspec.ErrInvalidSpec, err)
	}
	if !runspec.CleanAbs(e.Path) || !runspec.CleanAbs(e.Dir) {
		return execSpec{}, fmt.Errorf("%w: exec spec: path %q, dir %q", runspec.ErrInvalidSpec, e.Path, e.Dir)
	}
	if err := runspec.ValidateArgv(e.Argv); err != nil {
		return execSpec{}, err
	}
	if err := runspec.ValidateEnv(e.Env); err != nil {
		return execSpec{}, err
	}
	if e.Git != nil {
		if err := e.Git.Validate(e.Env); err != nil {
			return execSpec{}, err
		}
	}
	for _, r := range e.Rlimits {
		if !slices.Contains(runspec.RlimitNames, r.Name) {
			return execSpec{}, fmt.Errorf("%w: exec spec: rlimit %q", runspec.ErrInvalidSpec, r.Name)
		}
	}
	return e, nil
}
