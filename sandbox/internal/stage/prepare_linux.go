package stage

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/sandbox/internal/chain"
	"github.com/batonhq/baton/sandbox/internal/egress"
	"github.com/batonhq/baton/sandbox/runspec"
)

// rootBundles are where distributions keep the host's CA certificates in
// one file: Debian's, Fedora's, then Alpine's and the BSDs'.
var rootBundles = []string{"/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem"}

// hostRoots is the host's CA bundle, ending with a newline, or "" when
// the host has none: the sandbox's bundle is then the run's CA alone, and
// only secrets' hosts are reachable over TLS by tools that read it.
func hostRoots() string {
	for _, p := range rootBundles {
		if b, err := os.ReadFile(p); err == nil && len(b) > 0 {
			if b[len(b)-1] != '\n' {
				b = append(b, '\n')
			}
			return string(b)
		}
	}
	return ""
}

// toolPath is where runner-outer looks for pasta and nft: its own
// environment is empty. A variable only so that tests can build a runner
// that finds stand-ins first (-ldflags -X).
var toolPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// outerPlan is what runner-outer decided and opened before the chain
// starts, while it may still be root.
type outerPlan struct {
	inner     innerSpec
	input     *os.File // the agent's stdin
	state     *os.File // state.ndjson, for the stages below
	workspace *os.File // the agent directory, O_PATH, for runner-inner's fchdir
	cgroup    *runCgroup
	pasta     string // pasta's path, for chain.NetPasta
	policy    *egress.Policy
	// ca is the run's CA when it has secrets; its key stays in
	// runner-outer.
	ca egress.CA
}

func (p *outerPlan) summary() string {
	parts := []string{"network " + p.inner.Net.Mode, fmt.Sprintf("%d mounts", len(p.inner.Child.Mounts))}
	if p.inner.Child.Binary != "" {
		parts = append(parts, "baton bound at "+p.inner.Child.Binary)
	}
	if p.cgroup != nil {
		parts = append(parts, "cgroup "+p.cgroup.path)
	}
	for _, r := range p.inner.Child.Rlimits {
		parts = append(parts, fmt.Sprintf("rlimit %s=%d", r.Name, r.Value))
	}
	return strings.Join(parts, ", ")
}

// closeFiles closes what only the chain's start needed.
func (p *outerPlan) closeFiles() {
	for _, f := range []*os.File{p.input, p.state, p.workspace} {
		if f != nil {
			f.Close()
		}
	}
}

// prepare resolves the spec against this host: the network's tools and
// policy, the profile's mounts, the baton binary's bind, the agent's
// /etc, limits and cgroup. Whatever the profile needs and this host lacks
// fails the run here, with what to fix.
func (o *outerRun) prepare() (_ *outerPlan, err error) {
	s := o.spec
	p := &outerPlan{}
	defer func() {
		if err != nil {
			p.closeFiles()
			p.cgroup.close()
		}
	}()
	uid, gid := s.SandboxIDs(os.Geteuid(), os.Getegid())
	auid, agid := s.AgentIDs()
	ws := o.dir.Workspace()
	mode := chain.NetMode(s.Network)
	p.inner.Net.Mode = mode
	if mode != chain.NetNone {
		if p.policy, err = egress.NewPolicy(s.Network); err != nil {
			return nil, err
		}
	}
	if mode == chain.NetPasta {
		if err := p.preparePasta(uid, s.Network.Prefixes()); err != nil {
			return nil, err
		}
	}
	// A prestarted chain's input comes with its take.
	if !s.Pooled {
		if p.input, err = o.dir.Open(journal.InputName, os.O_RDONLY, 0); err != nil {
			return nil, fmt.Errorf("open the input: %w", err)
		}
	}
	if p.state, err = o.dir.Open(journal.StateName, os.O_WRONLY|os.O_APPEND, 0); err != nil {
		return nil, fmt.Errorf("open the state file: %w", err)
	}
	c := &p.inner.Child
	c.RunDir, c.AgentUID, c.AgentGID = s.RunDir, auid, agid
	// The agent directory, which runner-inner makes the sandbox's cwd:
	// in a run directory made before it, the workspace, and no home.
	switch p.workspace, err = o.dir.Open(journal.AgentName, unix.O_PATH|unix.O_DIRECTORY, 0); {
	case err == nil:
		c.Home = true
	case errors.Is(err, fs.ErrNotExist):
		if p.workspace, err = o.dir.Open(journal.WorkspaceName, unix.O_PATH|unix.O_DIRECTORY, 0); err != nil {
			return nil, fmt.Errorf("open the workspace: %w", err)
		}
	default:
		return nil, fmt.Errorf("open the agent's directory: %w", err)
	}
	env := chain.AgentSpecEnv(s)
	if s.Pooled {
		// The agent's argv and environment come with the take.
		c.Pooled = true
	} else {
		c.Argv, c.Env, c.Git = s.Argv, env, s.Git
	}
	if c.Binary, c.BinaryDev, c.BinaryIno, err = bindBinary(s.Argv[0], s.Baton); err != nil {
		return nil, err
	}
	var mcpCommand string
	if s.Tools != nil {
		// `baton mcp` runs in the sandbox: the binary is there at its own
		// path, bound unless a system directory shows it anyway.
		if mcpCommand, err = batonPath(s.Baton); err != nil {
			return nil, err
		}
		if c.Binary == "" {
			if c.Binary, c.BinaryDev, c.BinaryIno, err = bindBinary(mcpCommand, s.Baton); err != nil {
				return nil, err
			}
		}
		p.inner.Tools = true
	}
	if c.Mounts, err = resolveMounts(s, ws); err != nil {
		return nil, err
	}
	if err := checkDests(c.Mounts, c.Binary); err != nil {
		return nil, err
	}
	home, ok := chain.EnvValue(env, "HOME")
	if !ok {
		home = defaultHome(c.Home)
	}
	c.Etc = etcFiles(auid, agid, home, mode)
	if len(s.Network.Secrets) > 0 {
		if err := egress.TLSReady(); err != nil {
			return nil, err
		}
		if p.ca, err = egress.NewCA(egress.SecretHosts(s.Network.Secrets)); err != nil {
			return nil, err
		}
		cert := string(p.ca.CertPEM())
		c.Etc[chain.CAFile], c.Etc[chain.CABundleFile] = cert, hostRoots()+cert
	}
	if mcpCommand != "" {
		maps.Copy(c.Etc, mcpConfigFiles(mcpCommand))
	}
	c.TmpBytes, c.ShmBytes = tmpSizes(s.Limits)
	c.Rlimits = rlimitsFor(s.Limits)
	if p.cgroup, err = openRunCgroup(s.CgroupParent, s.RunID, s.Limits, uid, gid); err != nil {
		return nil, err
	}
	return p, nil
}

// preparePasta finds pasta and nft, checks uid can open /dev/net/tun,
// and renders the nft ruleset.
func (p *outerPlan) preparePasta(uid int, prefixes []netip.Prefix) error {
	find := func(name, pkg string) (string, error) {
		f, err := LookTool(name)
		if err != nil {
			return "", fmt.Errorf("network.allow lists CIDR entries, which need %s: %w (apt-get install %s; `baton doctor` checks it)", name, err, pkg)
		}
		return f, nil
	}
	var err error
	if p.pasta, err = find("pasta", "passt"); err != nil {
		return err
	}
	if p.inner.Net.Nft, err = find("nft", "nftables"); err != nil {
		return err
	}
	var st unix.Stat_t
	if err := unix.Stat("/dev/net/tun", &st); err != nil {
		return fmt.Errorf("pasta needs /dev/net/tun: %w (modprobe tun)", err)
	}
	if !TunUsableBy(st.Mode&0o777, st.Uid, uint32(uid)) {
		return fmt.Errorf("pasta runs as uid %d, which cannot open /dev/net/tun (mode %04o, owner %d): chmod 0666 /dev/net/tun (`baton doctor` says more)",
			uid, st.Mode&0o777, st.Uid)
	}
	host, err := egress.InterfaceAddrs()
	if err != nil {
		return fmt.Errorf("list the host's addresses: %w", err)
	}
	p.inner.Net.Ruleset = NftRuleset(prefixes, host)
	return nil
}

// batonPath is the baton binary's path on the host: baton, the spec's,
// or else the runner's own.
func batonPath(baton string) (string, error) {
	if baton == "" {
		baton = "/proc/self/exe"
	}
	p, err := filepath.EvalSymlinks(baton)
	if err != nil {
		return "", fmt.Errorf("the baton binary, for baton mcp: %w", err)
	}
	return p, nil
}

// bindBinary is where the baton binary is bound into the sandbox, with
// its identity: at argv0, when argv0 names that very file (the profile
// runs `{baton} fake-agent`) outside the system directories the agent
// sees anyway; "" otherwise. The baton binary is baton, the spec's, or
// else the runner's own.
func bindBinary(argv0, baton string) (string, uint64, uint64, error) {
	if !filepath.IsAbs(argv0) || filepath.Clean(argv0) != argv0 {
		return "", 0, 0, nil
	}
	for _, d := range systemDirs {
		if strings.HasPrefix(argv0, d+"/") {
			return "", 0, 0, nil
		}
	}
	if baton == "" {
		baton = "/proc/self/exe"
	}
	want, err := os.Stat(baton)
	if err != nil {
		return "", 0, 0, fmt.Errorf("stat the baton binary: %w", err)
	}
	fi, err := os.Lstat(argv0)
	if err != nil || !os.SameFile(fi, want) {
		return "", 0, 0, nil
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return "", 0, 0, fmt.Errorf("stat %s: no device and inode", argv0)
	}
	return argv0, uint64(st.Dev), st.Ino, nil
}

// resolveMounts resolves the profile's mount sources on the host,
// refusing any that would show the node's run directories.
func resolveMounts(s runspec.Spec, workspace string) ([]bindMount, error) {
	if len(s.Mounts) == 0 {
		return nil, nil
	}
	runs, err := filepath.EvalSymlinks(filepath.Dir(s.RunDir))
	if err != nil {
		return nil, err
	}
	var out []bindMount
	for _, m := range s.Mounts {
		src, err := filepath.EvalSymlinks(m.Source)
		if err != nil {
			return nil, fmt.Errorf("mount %s: %w", m.Source, err)
		}
		if underOrAbove(src, runs) || underOrAbove(src, workspace) {
			return nil, fmt.Errorf("mount %s (%s) would show the node's run directories", m.Source, src)
		}
		fi, err := os.Stat(src)
		if err != nil {
			return nil, fmt.Errorf("mount %s: %w", m.Source, err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		out = append(out, bindMount{Source: src, Dest: m.Dest(), Writable: m.Writable, Dev: st.Dev, Ino: st.Ino})
	}
	return out, nil
}

// dropPrivileges makes a root runner the spec's sandbox uid and gid, for
// good: the user namespace it creates next is then owned by that uid (so
// pasta, which refuses root, may join it), and whatever the runner does
// afterwards, serving the agent's proxy and DNS queries included, runs
// without privilege. It returns what it did, "" when not root.
func dropPrivileges(s runspec.Spec) (string, error) {
	if os.Geteuid() != 0 {
		return "", nil
	}
	uid, gid := s.SandboxIDs(0, 0)
	if err := syscall.Setgroups(nil); err != nil {
		return "", fmt.Errorf("drop supplementary groups: %w", err)
	}
	if err := syscall.Setresgid(gid, gid, gid); err != nil {
		return "", fmt.Errorf("setresgid %d: %w", gid, err)
	}
	if err := syscall.Setresuid(uid, uid, uid); err != nil {
		return "", fmt.Errorf("setresuid %d: %w", uid, err)
	}
	if os.Geteuid() != uid {
		return "", errors.New("still root after setresuid")
	}
	return fmt.Sprintf("uid %d, gid %d, no supplementary groups", uid, gid), nil
}

// LookTool finds an executable on toolPath.
func LookTool(name string) (string, error) {
	for _, d := range filepath.SplitList(toolPath) {
		if p, err := exec.LookPath(filepath.Join(d, name)); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found in %s", name, toolPath)
}
