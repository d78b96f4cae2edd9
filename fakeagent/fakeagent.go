package fakeagent

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/pflag"
)

// DefaultLines is the number of lines before the result when Options.Lines is 0.
const DefaultLines = 20

// MaxPrompt is how much of stdin EchoInput puts in the init event.
const MaxPrompt = 4 << 10

// ErrInvalidOptions is returned (wrapped) by Run for options it cannot honour.
var ErrInvalidOptions = errors.New("fakeagent: invalid options")

// Options say what the fake agent writes and how it ends.
type Options struct {
	// Lines is the number of lines before the final result event, the
	// system/init event included (0 means DefaultLines).
	Lines int
	// LineSize is the size in bytes, newline included, each text-delta line
	// is padded or cut to (0: natural size, about 110 to 150 bytes). A line
	// cannot be smaller than its JSON frame (about 110 bytes). Text deltas
	// are most lines, so for sizes of 200 to 1000 the mean line size is
	// within 25% of LineSize; the other events keep their natural size.
	LineSize int
	// Rate is lines per second; 0 writes as fast as the reader takes them.
	Rate float64
	// Seed makes the whole output byte-for-byte deterministic.
	Seed int64
	// RawEvery makes every RawEvery-th line (counted from 1 over the whole
	// output, first and last line excepted) a non-JSON line such as
	// "progress: 42%"; 0 means never.
	RawEvery int
	// PartialLast leaves the last line without its newline.
	PartialLast bool
	// ExitCode is the code the agent ends with (0..255).
	ExitCode int
	// Signal, if set ("TERM", "SIGKILL", "segv", "9"), is the signal the
	// agent dies by at the end instead of exiting; see ParseSignal.
	Signal string
	// Stderr is written to stderr at the end (a newline is added if it
	// lacks one).
	Stderr string
	// EchoInput reads stdin to EOF before anything else and puts its first
	// MaxPrompt bytes in the init event's "prompt" field.
	EchoInput bool
	// ForgeSentinel writes, as the second line, a line shaped like baton's
	// journal sentinel with a made-up nonce. It is one line more than Lines.
	ForgeSentinel bool
	// Duration, if > 0, makes the agent write lines at Rate until this long
	// has passed since it started, then the result; Lines is ignored.
	Duration time.Duration
	// Story tells the fake session once, in order (read the handler, run
	// the failing test, search, edit, run the suite, a closing message),
	// then writes the result; Lines is ignored. Without it the stream
	// retells the story for as many lines as asked.
	Story bool
	// FollowUp (with Story) keeps the session open for a second turn, as
	// an agent whose stdin stays open does: the prompt is stdin's first
	// line (a stream-json user message or plain text), and after the
	// story's result the agent reads one more such line and tells a
	// second turn (it adds a regression test), ending in a second result;
	// it then reads stdin to its end and exits 0. If stdin ends before
	// the second message, the agent ends after the first turn.
	FollowUp bool
	// Chat selects the conversation mode (see Chat): the other options
	// are then ignored.
	Chat bool
	// MCPCalls selects the MCP client mode (see MCPClient): that many
	// calls of MCPTool, one after the other, through `baton mcp`; the
	// other options are then ignored.
	MCPCalls int
	MCPTool  string
	// Burn is CPU time the agent spends, busy, before its stream, as
	// its process's own CPU clock counts it: a known figure for a run's
	// usage to be checked against.
	Burn time.Duration
}

// RegisterFlags binds the fields of o to the flags of `baton fake-agent`.
func (o *Options) RegisterFlags(fs *pflag.FlagSet) {
	fs.IntVar(&o.Lines, "lines", DefaultLines, "lines before the final result event, the init event included")
	fs.IntVar(&o.LineSize, "line-size", 0, "bytes per text-delta line, newline included (0: natural size)")
	fs.Float64Var(&o.Rate, "rate", 0, "lines per second (0: as fast as possible)")
	fs.Int64Var(&o.Seed, "seed", 0, "seed; the same seed gives the same output, byte for byte")
	fs.IntVar(&o.RawEvery, "raw-every", 0, "make every Nth line a non-JSON line (0: never)")
	fs.BoolVar(&o.PartialLast, "partial-last", false, "leave the last line without its newline")
	fs.IntVar(&o.ExitCode, "exit-code", 0, "exit code to end with (0-255)")
	fs.StringVar(&o.Signal, "signal", "", "die by this signal at the end instead of exiting (KILL, TERM, SEGV, ...)")
	fs.StringVar(&o.Stderr, "stderr", "", "text to write to stderr before ending")
	fs.BoolVar(&o.EchoInput, "echo-input", false, "read stdin first and put it (up to 4 KiB) in the init event's prompt")
	fs.BoolVar(&o.ForgeSentinel, "forge-sentinel", false, "also write a line that looks like baton's exit sentinel, with a made-up nonce")
	fs.DurationVar(&o.Duration, "duration", 0, "write lines at --rate until this long has passed (--lines is then ignored)")
	fs.BoolVar(&o.Story, "story", false, "tell the session once, from the first message to the result (an explicit --lines or --duration wins)")
	fs.BoolVar(&o.FollowUp, "follow-up", false, "with --story: read the prompt as stdin's first line, and after the result one more user message, answered by a second turn (a regression test); exit at stdin's end")
	fs.IntVar(&o.MCPCalls, "mcp-calls", 0, "be an MCP client of `baton mcp` (the run's host tools): list the tools, make this many calls of --mcp-tool one after the other, and print each round trip and their percentiles")
	fs.StringVar(&o.MCPTool, "mcp-tool", "", "the tool --mcp-calls calls")
	fs.DurationVar(&o.Burn, "burn", 0, "spend this much CPU time, busy, before the stream (a known CPU figure for usage checks)")
	fs.BoolVar(&o.Chat, "chat", false, "converse on stdin like Claude Code's stream-json: echo, ask approval (\"approve: CMD\"), slow turns (\"slow\") that SIGINT or an interrupt control_request stop")
}

// ExitError is how Run says the agent should end other than with status 0:
// with exit status Code, or, if Signal is set, killed by that signal (its
// canonical name, e.g. "TERM").
type ExitError struct {
	Code   int
	Signal string
}

func (e *ExitError) Error() string {
	if e.Signal != "" {
		return "killed by signal " + e.Signal
	}
	return fmt.Sprintf("exit status %d", e.Code)
}

// Run writes the fake agent's stream to stdout and the Stderr text to
// stderr. It returns nil, an *ExitError when the agent should end non-zero or
// by a signal, an error wrapping ErrInvalidOptions, a write error, or, if ctx
// ends first, context.Cause(ctx) after the last whole line.
func Run(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer, o Options) error {
	sig, err := o.validate()
	if err != nil {
		return err
	}
	if o.Lines == 0 {
		o.Lines = DefaultLines
	}
	var prompt []byte
	var in *bufio.Scanner // stdin's lines (FollowUp)
	if o.FollowUp {
		in = bufio.NewScanner(stdin)
		in.Buffer(make([]byte, 0, 64<<10), 1<<20)
	}
	switch {
	case o.FollowUp:
		switch {
		case in.Scan():
			if o.EchoInput {
				_, text := parseChat(in.Bytes())
				prompt, _ = readPrompt(strings.NewReader(text))
			}
		case in.Err() != nil:
			return readErr(in)
		}
	case o.EchoInput:
		if prompt, err = readPrompt(stdin); err != nil {
			return fmt.Errorf("fakeagent: read stdin: %w", err)
		}
	}
	o.Signal = sig
	if err := burn(ctx, o.Burn); err != nil {
		return err
	}
	g := newGenerator(o.Seed, o.LineSize)

	p := newPacer(ctx, o.Rate)
	defer p.stop()
	deadline := p.start.Add(o.Duration)
	// n is the 1-based number of the line being written; without Duration
	// the last one, the result, is line last.
	last := o.Lines + 1
	if o.ForgeSentinel {
		last++
	}
	write := func(line []byte) error {
		if _, err := stdout.Write(line); err != nil {
			return fmt.Errorf("fakeagent: write stdout: %w", err)
		}
		return nil
	}
	for n := 1; ; n++ {
		if o.Duration > 0 && n > 1 && !p.before(n, deadline) {
			// Time is up: the result goes out at the deadline, not at
			// the next line's slot.
			if err := p.waitUntil(deadline); err != nil {
				return err
			}
			return finish(g, n, o, write, stderr)
		}
		if err := p.wait(n); err != nil {
			return err
		}
		var line []byte
		switch {
		case o.FollowUp && n > 1 && g.told() && g.summary == storySummary:
			// The first turn ends; the second starts when its message comes.
			if err := write(g.resultLine(n, o, false)); err != nil {
				return err
			}
			if !in.Scan() {
				return readErr(in)
			}
			g.followUp()
			p.restart(n + 1)
			continue
		case o.FollowUp && n > 1 && g.told():
			if err := finish(g, n, o, write, stderr); err != nil {
				return err
			}
			for in.Scan() { // the session lasts until stdin ends
			}
			return readErr(in)
		case o.Story && n > 1 && g.told(), !o.Story && o.Duration == 0 && n == last:
			return finish(g, n, o, write, stderr)
		case n == 1:
			line = g.initLine(prompt, o.EchoInput)
		case n == 2 && o.ForgeSentinel:
			line = g.forgedSentinel()
		case o.RawEvery > 0 && n%o.RawEvery == 0:
			line = g.rawLine(n, last, o.Duration > 0)
		default:
			line = g.event()
		}
		if err := write(line); err != nil {
			return err
		}
	}
}

// finish writes the result event (line n) and the stderr text, and says
// how to end. o.Signal is canonical here.
func finish(g *generator, n int, o Options, write func([]byte) error, stderr io.Writer) error {
	failed := o.ExitCode != 0 || o.Signal != ""
	line := g.resultLine(n, o, failed)
	if o.PartialLast {
		line = line[:len(line)-1]
	}
	if err := write(line); err != nil {
		return err
	}
	if o.Stderr != "" {
		s := o.Stderr
		if !strings.HasSuffix(s, "\n") {
			s += "\n"
		}
		if _, err := io.WriteString(stderr, s); err != nil {
			return fmt.Errorf("fakeagent: write stderr: %w", err)
		}
	}
	if failed {
		return &ExitError{Code: o.ExitCode, Signal: o.Signal}
	}
	return nil
}

// validate checks o and returns the canonical name of its signal.
func (o Options) validate() (string, error) {
	bad := func(format string, a ...any) (string, error) {
		return "", fmt.Errorf("%w: "+format, append([]any{ErrInvalidOptions}, a...)...)
	}
	switch {
	case o.Lines < 0:
		return bad("lines %d < 0", o.Lines)
	case o.Burn < 0:
		return bad("burn %v < 0", o.Burn)
	case o.LineSize < 0:
		return bad("line size %d < 0", o.LineSize)
	case o.Rate < 0 || o.Rate != o.Rate:
		return bad("rate %v is not >= 0", o.Rate)
	case o.RawEvery < 0:
		return bad("raw-every %d < 0", o.RawEvery)
	case o.ExitCode < 0 || o.ExitCode > 255:
		return bad("exit code %d not in 0..255", o.ExitCode)
	case o.Duration < 0:
		return bad("duration %v < 0", o.Duration)
	case o.Story && o.Duration > 0:
		return bad("story and duration both set")
	case o.FollowUp && !o.Story:
		return bad("follow-up needs story")
	case o.FollowUp && (o.ExitCode != 0 || o.Signal != "" || o.PartialLast):
		return bad("follow-up ends at the end of stdin, with status 0")
	}
	if o.Signal == "" {
		return "", nil
	}
	s, err := ParseSignal(o.Signal)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	return SignalName(s), nil
}

// readPrompt reads r to EOF and keeps its first MaxPrompt bytes, cut at a
// rune boundary and made valid UTF-8 so it encodes as a JSON string.
func readPrompt(r io.Reader) ([]byte, error) {
	if r == nil {
		return []byte{}, nil
	}
	b, err := io.ReadAll(io.LimitReader(r, MaxPrompt+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxPrompt {
		// Drain the rest, as a real agent reading its prompt would.
		if _, err := io.Copy(io.Discard, r); err != nil {
			return nil, err
		}
		b = b[:MaxPrompt]
		// Do not split a multi-byte rune: drop an incomplete one at the cut.
		for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
			if utf8.RuneStart(b[i]) {
				if !utf8.FullRune(b[i:]) {
					b = b[:i]
				}
				break
			}
		}
	}
	return []byte(strings.ToValidUTF8(string(b), "\uFFFD")), nil
}

// pacer schedules line n at start + (n-1)/rate, so sleep overshoot does not
// add up over a run.
type pacer struct {
	ctx   context.Context
	done  <-chan struct{}
	rate  float64
	start time.Time
	timer *time.Timer
}

func newPacer(ctx context.Context, rate float64) *pacer {
	return &pacer{ctx: ctx, done: ctx.Done(), rate: rate, start: time.Now()}
}

func (p *pacer) due(n int) time.Time {
	return p.start.Add(time.Duration(float64(n-1) / p.rate * float64(time.Second)))
}

// before reports whether line n is due before t.
func (p *pacer) before(n int, t time.Time) bool {
	if p.rate > 0 {
		return p.due(n).Before(t)
	}
	return time.Now().Before(t)
}

// wait blocks until line n is due or ctx ends.
func (p *pacer) wait(n int) error {
	if p.rate > 0 {
		return p.waitUntil(p.due(n))
	}
	select {
	case <-p.done:
		return context.Cause(p.ctx)
	default:
		return nil
	}
}

func (p *pacer) waitUntil(t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		select {
		case <-p.done:
			return context.Cause(p.ctx)
		default:
			return nil
		}
	}
	if p.timer == nil {
		p.timer = time.NewTimer(d)
	} else {
		p.timer.Reset(d)
	}
	select {
	case <-p.done:
		return context.Cause(p.ctx)
	case <-p.timer.C:
		return nil
	}
}

// restart makes line n due now: after a wait for input, the lines that
// follow keep their pace instead of catching up.
func (p *pacer) restart(n int) {
	if p.rate > 0 {
		p.start = time.Now().Add(-time.Duration(float64(n-1) / p.rate * float64(time.Second)))
	}
}

// readErr is the end of stdin's lines: nil at its end, or the read error.
func readErr(in *bufio.Scanner) error {
	if err := in.Err(); err != nil {
		return fmt.Errorf("fakeagent: read stdin: %w", err)
	}
	return nil
}

func (p *pacer) stop() {
	if p.timer != nil {
		p.timer.Stop()
	}
}
