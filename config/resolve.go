package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/batonhq/baton/agui"
	"github.com/batonhq/baton/policy"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/sandbox/runspec"
)

// baseEnv is what every agent starts from; HOME is the sandbox's to set.
var baseEnv = map[string]string{
	"PATH": "/usr/local/bin:/usr/bin:/bin",
	"LANG": "C.UTF-8",
}

// Invocation is a job resolved against its profile: exactly what the agent
// runs with.
type Invocation struct {
	Profile string
	// Argv is the profile's command, with BatonToken replaced by the baton
	// binary's path, and the job's args where the profile's AllowArgs
	// places them.
	Argv []string
	// Env is "K=V", sorted by key, each key once: the base environment
	// (PATH, LANG), then the profile's env, then the job's; later wins.
	Env   []string
	Input []byte
	// Files are the job's files of the workspace, HomeFiles those of the
	// agent's home (protocol.HomeFilePrefix, which they lose).
	Files, HomeFiles map[string]string
	Timeout          time.Duration
	Network          runspec.Network
	// Outputs is what the run's capture stores (the profile's).
	Outputs runspec.Outputs
	// Mounts, Limits, AgentUID and AgentGID are the profile's, for the
	// sandbox.
	Mounts   []runspec.Mount
	Limits   runspec.Limits
	AgentUID int
	AgentGID int
	// Stdin is the profile's stdin mode, StdinOnce when it sets none.
	Stdin StdinMode
	// Interrupt is the profile's interrupt.
	Interrupt Interrupt
	// TurnEnd and IdleTimeout are the profile's (TurnEnd nil: none).
	TurnEnd     *TurnEnd
	IdleTimeout time.Duration
	// Nice is the profile's CPU priority for the run.
	Nice int
	// Events is the profile's events dialect, kept in the run's record.
	Events agui.Dialect
	// For a job of a session: Session is the profile's session block with
	// its defaults, ResumeArgv is Argv with its resumeArgs placed (for a
	// run that continues from a checkpoint), and Setup the profile's setup
	// commands. Zero for other jobs.
	Session    Session
	ResumeArgv []string
	Setup      []string
	// Tools are the profile's host tools (nil: none).
	Tools *runspec.Tools
	// Git is the job's workspace repository, with the secret that is its
	// credential (nil: none).
	Git *runspec.Git
	// Policy is the profile's policy narrowed by the job's (nil: none, the
	// prompts are passed through), AskTimeout the profile's askTimeout
	// (DefaultAskTimeout when it sets none; 0 without a policy).
	Policy     *policy.Policy
	AskTimeout time.Duration
}

// Limits are the job limits this configuration sets.
func (c *Config) Limits() protocol.Limits {
	return protocol.Limits{MaxBytes: c.MaxJobBytes}
}

// Resolve turns a job, already decoded and validated, into the invocation
// its profile allows. self is the path of the running baton binary. A job
// naming no known profile is rejected with protocol.ErrUnknownProfile; one
// asking for args, env keys or a timeout the profile does not allow, with
// protocol.ErrNotAllowed.
func (c *Config) Resolve(job protocol.Job, self string) (Invocation, error) {
	p, ok := c.Profiles[job.Profile]
	if !ok {
		return Invocation{}, reject(protocol.ErrUnknownProfile, "unknown profile %q (known: %s)",
			job.Profile, strings.Join(profileNames(c.Profiles), ", "))
	}
	if err := p.AllowArgs.Check(job.Args); err != nil {
		return Invocation{}, reject(protocol.ErrNotAllowed, "profile %q: %v", job.Profile, err)
	}
	for _, k := range slices.Sorted(maps.Keys(job.Env)) {
		if !slices.Contains(p.AllowEnv, k) {
			allowed := "no env keys"
			if len(p.AllowEnv) > 0 {
				allowed = strings.Join(p.AllowEnv, ", ")
			}
			return Invocation{}, reject(protocol.ErrNotAllowed, "env key %q not allowed: profile %q allows %s", k, job.Profile, allowed)
		}
	}
	limit := p.Timeout
	if limit <= 0 {
		limit = DefaultProfileTimeout
	}
	timeout := limit
	if jt := time.Duration(job.Timeout); jt > limit {
		return Invocation{}, reject(protocol.ErrNotAllowed, "timeout %s exceeds profile %q limit of %s", jt, job.Profile, limit)
	} else if jt > 0 {
		timeout = jt
	}

	output := p.Limits.Output
	if output == 0 {
		output = DefaultOutputLimit
	}
	if jo := ByteSize(job.OutputLimit()); jo > output {
		return Invocation{}, reject(protocol.ErrNotAllowed, "output limit %d bytes exceeds profile %q limit of %d bytes", jo, job.Profile, output)
	} else if jo > 0 {
		output = jo
	}

	command := make([]string, 0, len(p.Command))
	for _, a := range p.Command {
		if strings.Contains(a, BatonToken) {
			if self == "" {
				return Invocation{}, fmt.Errorf("config: profile %q uses %s, but the baton binary's path is unknown", job.Profile, BatonToken)
			}
			a = strings.ReplaceAll(a, BatonToken, self)
		}
		command = append(command, a)
	}
	argv := p.AllowArgs.place(command, job.Args) // verbatim: a job cannot name the baton binary
	var sess Session
	var resume, setup []string
	if job.Session != "" {
		sess, setup = p.Session.OrDefault(), slices.Clone(p.Setup)
		// After the command's leading words, as a subcommand or a flag of
		// the profile's; the job's args then go where they would.
		resume = p.AllowArgs.place(ArgPolicy{}.place(command, sess.ResumeArgs), job.Args)
	}

	limits := Limits{Pids: p.Limits.Pids, Memory: p.Limits.Memory, CPUs: p.Limits.CPUs, Tmp: p.Limits.Tmp, Disk: p.Limits.Disk, Rlimits: maps.Clone(p.Limits.Rlimits), Output: output, Outputs: p.Limits.Outputs, Stderr: p.Limits.Stderr}
	if jd := int64(job.DiskLimit()); jd > 0 {
		disk := ByteSize(DefaultDiskBytes)
		if limits.Disk > 0 {
			disk = limits.Disk
		}
		switch {
		case jd > int64(disk):
			return Invocation{}, reject(protocol.ErrNotAllowed, "disk %d exceeds profile %q limit of %d bytes", jd, job.Profile, disk)
		case jd < runspec.MinDiskBytes:
			return Invocation{}, reject(protocol.ErrNotAllowed, "disk %d is below the smallest workspace, %d bytes", jd, runspec.MinDiskBytes)
		}
		limits.Disk = ByteSize(jd)
	}

	if jo := int64(job.OutputsLimit()); jo > 0 {
		if profile := p.Limits.OutputsBytes(); jo > profile {
			return Invocation{}, reject(protocol.ErrNotAllowed, "outputs limit %d bytes exceeds profile %q limit of %d bytes", jo, job.Profile, profile)
		}
		limits.Outputs = ByteSize(jo)
	}

	pol, askTimeout, err := p.resolvePolicy(job)
	if err != nil {
		return Invocation{}, err
	}

	outs, err := p.Outputs.narrow(job.Profile, job.Outputs)
	if err != nil {
		return Invocation{}, err
	}

	var mounts []runspec.Mount
	for _, m := range p.Mounts {
		mounts = append(mounts, runspec.Mount(m))
	}

	secrets, upstreamCA, err := p.resolveSecrets(job.Profile)
	if err != nil {
		return Invocation{}, err
	}
	network := runspec.Network{Allow: slices.Clone(p.Network.Allow), Hosts: maps.Clone(p.Network.Hosts),
		Secrets: secrets, UpstreamCA: upstreamCA}
	git, err := resolveGit(job, secrets, network)
	if err != nil {
		return Invocation{}, err
	}
	wsFiles, homeFiles := protocol.SplitFiles(job.Files)
	env := maps.Clone(baseEnv)
	maps.Copy(env, p.Env)
	maps.Copy(env, job.Env)
	for _, s := range secrets {
		env[s.Name] = s.Placeholder
	}
	envv := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		envv = append(envv, k+"="+env[k])
	}

	return Invocation{
		Profile:     job.Profile,
		Argv:        argv,
		Env:         envv,
		Input:       jobInput(job.Input, p.Stdin.OrDefault()),
		Files:       wsFiles,
		HomeFiles:   homeFiles,
		Timeout:     timeout,
		Network:     network,
		Git:         git,
		Mounts:      mounts,
		Limits:      limits.Spec(),
		Outputs:     runspec.Outputs(outs),
		AgentUID:    p.AgentUID,
		AgentGID:    p.AgentGID,
		Stdin:       p.Stdin.OrDefault(),
		Interrupt:   p.Interrupt,
		TurnEnd:     p.TurnEnd,
		IdleTimeout: p.IdleTimeout,
		Nice:        p.Nice,
		Events:      p.Events,
		Session:     sess,
		ResumeArgv:  resume,
		Setup:       setup,
		Tools:       p.toolsSpec(),
		Policy:      pol,
		AskTimeout:  askTimeout,
	}, nil
}

// resolvePolicy is the run's policy, the profile's narrowed by the job's,
// and its askTimeout. A job's policy on a profile without one is refused:
// it would have baton decide what a person decides today.
func (p Profile) resolvePolicy(job protocol.Job) (*policy.Policy, time.Duration, error) {
	if p.Policy == nil {
		if job.Policy != nil {
			return nil, 0, reject(protocol.ErrNotAllowed, "profile %q has no policy for a job's policy to narrow: its permission prompts are passed through to whoever answers them", job.Profile)
		}
		return nil, 0, nil
	}
	pol := policy.Policy{Default: p.Policy.Default, Allow: slices.Clone(p.Policy.Allow),
		Ask: slices.Clone(p.Policy.Ask), Deny: slices.Clone(p.Policy.Deny)}
	if job.Policy != nil {
		pol = p.Policy.Narrow(*job.Policy)
	}
	askTimeout := p.AskTimeout
	if askTimeout == 0 {
		askTimeout = DefaultAskTimeout
	}
	return &pol, askTimeout, nil
}

// rejection is a job rejection whose message reads without the sentinel's
// prefix but which still matches it with errors.Is.
type rejection struct {
	kind error
	msg  string
}

func reject(kind error, format string, args ...any) error {
	return &rejection{kind: kind, msg: fmt.Sprintf(format, args...)}
}

func (r *rejection) Error() string { return r.msg }
func (r *rejection) Unwrap() error { return r.kind }

// jobInput is what the agent reads first. On a stream stdin the job's input is
// the first turn, a line as every later send is (the sandbox adds a missing
// newline to those): without one a line-reading agent never starts its turn,
// and the first send is glued onto it.
func jobInput(input string, stdin StdinMode) []byte {
	if stdin == StdinStream && input != "" && !strings.HasSuffix(input, "\n") {
		input += "\n"
	}
	return []byte(input)
}
