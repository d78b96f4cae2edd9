package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/agui"
	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/internal/clock"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/policy"
	"github.com/batonhq/baton/protocol"
)

func newWatchCmd(g *globals) *cobra.Command {
	var asJSON, follow, asAGUI bool
	var sessionID, after string
	cmd := &cobra.Command{
		Use:   "watch RUNID | watch --session SESSION",
		Short: "Replay a run's events from the start, then follow it until it ends",
		Long: `watch prints every event, raw line and status of a run in order: first
what the run has already published, then live, until its terminal status.

By default the output is for people: agent text as it streams, tool calls
and results on one line each, statuses with worker, node and epoch, and the
exit code, reason and stderr tail at the end. --json prints each message's
payload unchanged, one per line.

It starts with the job's input, as the run's first turn, and ends with the
outputs the run's capture stored. A permission prompt shows as one line
(answer it with 'baton send', or type y or n in 'baton attach'). A run lost
with its node and retried is followed on to its retry. When the job was
rejected to the dead-letter stream it says why; when no worker has taken
the job after a few seconds, none holds the run after a hand-off, or none
answers at all (none runs, or the only one crashed), it says that on stderr
and waits.

--agui prints the run as AG-UI events instead (the projection the console's
AG-UI endpoint serves, package agui), one JSON object per line; --after
resumes after a position.

--session watches a session instead: every run of it in order, each from its
start, then each new run as it starts; with --follow=false it ends once the
session has no live run and every run of it was shown.

The exit status is 0 if the run (or its last retry) succeeded, or paused
(a session's run that waited for input past its pauseAfter), 1 if it
failed, was cancelled, timed out, was lost or its job was rejected, and 2 if
watching itself failed.`,
		Example: `  # Follow a run as it happens
  baton watch run-5kq2m8x3c1v7b0n4d6fa

  # Machine-readable: one payload per line, e.g. for jq
  baton watch run-5kq2m8x3c1v7b0n4d6fa --json | jq -c 'select(.type=="result")'`,
		Args: func(cmd *cobra.Command, args []string) error {
			if sessionID != "" {
				return cobra.NoArgs(cmd, args)
			}
			return cobra.ExactArgs(1)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := openSession(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer s.close()
			if asAGUI {
				if sessionID != "" {
					return errors.New("--agui watches one run: give its runId, not --session")
				}
				return s.watchAGUI(cmd.Context(), args[0], after, cmd.OutOrStdout())
			}
			if sessionID != "" {
				return s.watchSession(cmd.Context(), sessionID, follow, asJSON, cmd.OutOrStdout(), cmd.ErrOrStderr())
			}
			return s.watch(cmd.Context(), args[0], asJSON, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print each payload unchanged, one per line")
	cmd.Flags().StringVar(&sessionID, "session", "", "watch every run of this session, in order (docs/sessions.md)")
	cmd.Flags().BoolVar(&asAGUI, "agui", false, "print the run as AG-UI events, one JSON object per line (docs/agui.md)")
	cmd.Flags().StringVar(&after, "after", "", "with --agui: only the events after this position (<seq>:<index>, an SSE id of the console's AG-UI stream)")
	cmd.Flags().BoolVar(&follow, "follow", true, "with --session: go on with the session's new runs (false: end once it has no live run)")
	return cmd
}

// watchAGUI prints runID's AG-UI projection, after the position after
// when given, one event per line, and exits as watch does.
func (s *session) watchAGUI(ctx context.Context, runID, after string, out io.Writer) error {
	var opts []client.AGUIOption
	if after != "" {
		pos, err := agui.ParsePosition(after)
		if err != nil {
			return fmt.Errorf("--after: %w", err)
		}
		opts = append(opts, client.AGUIAfter(pos))
	}
	// json.Marshal, as the console's stream: the same bytes.
	st, err := s.c.WatchAGUI(ctx, runID, func(p agui.Projected) error {
		b, err := json.Marshal(p.Event)
		if err == nil {
			_, err = out.Write(append(b, '\n'))
		}
		return err
	}, opts...)
	switch {
	case err != nil:
		return err
	case st.Status != protocol.StatusSucceeded && st.Status != protocol.StatusPaused:
		return exitCodeError(1)
	}
	return nil
}

// sessionPoll is how often a session watch looks for the session's next
// run once it has shown every run so far.
const sessionPoll = time.Second

// watchSession prints every run of the session id in order, each as watch
// does (its outcome does not end the watch), then, with follow, each new
// run as it comes, until ctx ends; without, until the session has no live
// run and every run was shown.
func (s *session) watchSession(ctx context.Context, id string, follow, asJSON bool, out, errOut io.Writer) error {
	shown := map[string]bool{}
	for n := 0; ; {
		rec, err := s.c.Session(ctx, id)
		if err != nil {
			return err
		}
		before := n
		for _, run := range rec.Runs {
			if shown[run] {
				continue
			}
			shown[run] = true
			n++
			if !asJSON {
				fmt.Fprintf(out, "── run %s (%d of session %s)\n", sanitize([]byte(run), false), n, sanitize([]byte(id), false))
			}
			var code exitCodeError
			if err := s.watch(ctx, run, asJSON, out, errOut); err != nil && !errors.As(err, &code) {
				return err
			}
		}
		// Read again after showing runs: one may have started meanwhile.
		if !follow && rec.Live == "" && n == before {
			return nil
		}
		if !clock.Sleep(ctx, sessionPoll) {
			return ctx.Err()
		}
	}
}

// watch streams runID to out and turns its outcome into the command's
// exit status: nil when it succeeded, exitCodeError(1) when it ended
// otherwise or its job was rejected, exitCodeError(2) when the watch failed
// (said on errOut).
func (s *session) watch(ctx context.Context, runID string, asJSON bool, out, errOut io.Writer) error {
	return s.watchSince(ctx, runID, time.Time{}, "", asJSON, out, errOut)
}

// noticeAfter is how long a condition lasts before a watch tells it on
// stderr: no worker has taken the job, no worker holds the run after a
// hand-off, no worker answers at all. Each lasts milliseconds in a healthy
// run (a worker takes a job, or a hand-off, at once; a restarted worker
// answers within a second or two), and saying so then would be noise.
const noticeAfter = 3 * time.Second

// watchSince is watch for a job with input submitted at submitted (zero:
// unknown): a rejection of its runId stored before then is an older job's.
// A run lost with its node and retried is followed on to its retry, whose
// outcome is the watch's.
func (s *session) watchSince(ctx context.Context, runID string, submitted time.Time, input string, asJSON bool, out, errOut io.Writer) error {
	p := &eventPrinter{w: out, json: asJSON, color: useColor(out)}
	if input != "" {
		p.jobInput(input)
	}
	return s.follow(ctx, runID, submitted, p, errOut)
}

// follow is watchSince printing with p.
func (s *session) follow(ctx context.Context, runID string, submitted time.Time, p *eventPrinter, errOut io.Writer) error {
	errOut = &lockedWriter{w: errOut} // notices come from timers too
	for {
		st, err := s.watchRun(ctx, runID, submitted, p, errOut)
		switch {
		case err != nil:
			return err
		case st.Status == protocol.StatusLost && protocol.ValidRunID(st.RetriedAs):
			if !p.json {
				p.line(p.paint(styleCyan, "↻ following its retry, run "+st.RetriedAs))
			}
			runID, submitted = st.RetriedAs, time.Time{}
		case st.Status != protocol.StatusSucceeded && st.Status != protocol.StatusPaused:
			return exitCodeError(1)
		default:
			return nil
		}
	}
}

// watchRun prints runID's chain with p until its terminal status, which it
// returns. Its error is the exit status of a watch that ends otherwise,
// having said why on errOut.
func (s *session) watchRun(ctx context.Context, runID string, submitted time.Time, p *eventPrinter, errOut io.Writer) (protocol.Status, error) {
	p.runID = runID
	rec, err := s.c.Run(ctx, runID)
	if err == nil {
		if done, err := s.explainEnded(ctx, rec, errOut); done {
			if err == nil {
				return protocol.Status{Status: protocol.StatusSucceeded}, nil
			}
			return protocol.Status{}, err
		}
	}
	// The job's input is the run's first turn: a submitter shows its own;
	// a watcher, the record's, read again at the first message when the
	// record came after the watch began (a run just submitted).
	inputShown := !submitted.IsZero()
	showInput := func(rec kv.RunRecord) {
		if !inputShown && rec.Input != "" {
			p.jobInput(rec.Input)
		}
		inputShown = true
	}
	if err == nil {
		showInput(rec)
	}
	var seen atomic.Bool // a message arrived: the run is under way
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	unheld, noWorker := &notice{w: errOut}, &notice{w: errOut}
	defer unheld.disarm()
	defer noWorker.disarm()
	// While the run has no record its job may be in the dead-letter stream,
	// where the watch alone would wait for ever. A run with a record has no
	// rejection to look for; while no worker answers, the record is unknown.
	var rejected *client.RejectedError
	awaited := make(chan struct{})
	if errors.Is(err, client.ErrNotFound) || errors.Is(err, client.ErrNoWorker) {
		go func() {
			defer close(awaited)
			_, err := s.c.AwaitRecord(wctx, runID, client.RejectedSince(submitted),
				client.OnWaiting(noticeAfter, func() {
					if !seen.Load() {
						fmt.Fprintf(errOut, "run %s has no record yet: waiting for a worker to start it (Ctrl-C to stop)\n", runID)
					}
				}))
			if errors.As(err, &rejected) {
				stop()
			}
		}()
	} else {
		close(awaited)
	}
	st, err := s.c.Watch(wctx, runID, func(ev client.Event) error {
		seen.Store(true)
		if !inputShown {
			rec, _ := s.c.Run(wctx, runID) // once: a record it cannot read shows nothing
			showInput(rec)
		}
		if ev.Kind == protocol.KindStatus && ev.Status.Status == protocol.StatusHandoff {
			unheld.arm(fmt.Sprintf("run %s: no worker holds it since %s handed it off at %s; its agent runs on, and it resumes when a worker of its node takes it",
				runID, sanitize([]byte(ev.Status.Worker), false), ev.Status.Time.Local().Format("15:04:05 MST")))
		} else {
			unheld.disarm()
		}
		return p.print(ev)
	}, client.OnWorkers(func(answering bool) {
		if !answering {
			noWorker.arm(fmt.Sprintf("run %s: no worker answers (is a `baton worker` running?): waiting for one (Ctrl-C to stop); a run's agent goes on meanwhile", runID))
		} else if noWorker.disarm() {
			fmt.Fprintf(errOut, "run %s: a worker answers again\n", runID)
		}
	}))
	unheld.disarm()
	noWorker.disarm()
	stop()
	<-awaited
	p.finish()
	switch {
	case rejected != nil:
		e := rejected.Entry
		fmt.Fprintf(errOut, "run %s was rejected (%s) at %s: %s\n", runID, e.Reason, fmtTime(e.Time), sanitize([]byte(e.Error), false))
		fmt.Fprintf(errOut, "  'baton dlq' lists it; submit it again fixed, or under a new runId\n")
		return protocol.Status{}, exitCodeError(1)
	case err != nil && ctx.Err() != nil:
		fmt.Fprintf(errOut, "baton: watch %s: interrupted\n", runID)
		return protocol.Status{}, exitCodeError(2)
	case err != nil:
		fmt.Fprintf(errOut, "baton: %v\n", err)
		return protocol.Status{}, exitCodeError(2)
	}
	return st, nil
}

// notice is a line a watch prints on stderr when a condition lasts
// noticeAfter: armed when the condition begins, disarmed when it ends.
type notice struct {
	w     io.Writer
	mu    sync.Mutex
	timer *time.Timer
	gen   int  // a timer prints only if nothing disarmed it since it was armed
	shown bool // the armed notice was printed
}

// arm prints msg noticeAfter from now, unless disarmed before; a notice
// armed already is replaced.
func (n *notice) arm(msg string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.stop()
	gen := n.gen
	n.timer = time.AfterFunc(noticeAfter, func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		if n.gen == gen {
			fmt.Fprintln(n.w, msg)
			n.shown = true
		}
	})
}

// disarm ends the condition: once it returns, the notice prints nothing.
// It reports whether the notice was printed.
func (n *notice) disarm() (shown bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	shown = n.shown
	n.stop()
	return shown
}

func (n *notice) stop() {
	n.gen++
	n.shown = false
	if n.timer != nil {
		n.timer.Stop()
		n.timer = nil
	}
}

// lockedWriter serializes the writes of a watch's notices, which come from
// timers and its record wait, with its own.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// explainEnded reports, on errOut, the outcome of a run that ended so long
// ago that its events have aged out of the stream, where the watch would
// wait for ever (done is true then).
func (s *session) explainEnded(ctx context.Context, rec kv.RunRecord, errOut io.Writer) (done bool, err error) {
	if !rec.State.Terminal() {
		return false, nil // the watch follows the run
	}
	// Ended: the chain ends with its terminal status unless it aged out.
	if stored, err := s.c.ChainStored(ctx, rec.RunID); err != nil || stored {
		return false, nil
	}
	fmt.Fprintf(errOut, "run %s ended (%s) and its events are no longer in the stream\n", rec.RunID, runOutcome(rec))
	if rec.State == kv.RunState(protocol.StatusSucceeded) || rec.State == kv.RunState(protocol.StatusPaused) {
		return true, nil
	}
	return true, exitCodeError(1)
}

// runOutcome summarizes a run record's end for a person.
func runOutcome(r kv.RunRecord) string {
	s := string(r.State)
	if r.ExitCode != nil {
		s += fmt.Sprintf(", exit %d", *r.ExitCode)
	}
	if r.Reason != "" {
		s += ", " + sanitize([]byte(r.Reason), false)
	}
	return s
}

// useColor is true when out is a terminal and NO_COLOR is not set.
func useColor(out io.Writer) bool {
	return os.Getenv("NO_COLOR") == "" && isTerminal(out)
}

// ANSI styles.
const (
	styleReset  = "\x1b[0m"
	styleBold   = "\x1b[1m"
	styleDim    = "\x1b[2m"
	styleRed    = "\x1b[31m"
	styleGreen  = "\x1b[32m"
	styleYellow = "\x1b[33m"
	styleBlue   = "\x1b[34m"
	styleCyan   = "\x1b[36m"
)

// eventPrinter renders a run's events for a person (or, with json, as
// their payloads). It keeps the state that streaming text needs: whether
// the cursor is mid-line, and whether the current assistant message was
// already shown as deltas.
type eventPrinter struct {
	w        io.Writer
	json     bool
	color    bool
	midLine  bool // streamed text left the cursor mid-line
	streamed bool // text deltas of the current message were printed
	// prompts, when attach answers them, holds the permission prompts
	// waiting for an answer.
	prompts *prompts
	// runID is the run shown (for 'baton approve' hints); tools, the tool
	// of each approval id its prompt lines showed; asks, when attach
	// answers them, the approvals waiting for a person (watch_approvals.go).
	runID string
	tools map[string]string
	asks  *asks
	// reader reads the permission prompts, from every agent line (a Codex
	// file change's paths come before its prompt).
	reader policy.Reader
	err    error
}

// print renders one event; it fails only when the output cannot be written.
func (p *eventPrinter) print(ev client.Event) error {
	if p.json {
		p.write(ev.Data)
		if !bytes.HasSuffix(ev.Data, []byte("\n")) {
			p.write([]byte("\n"))
		}
		return p.err
	}
	switch ev.Kind {
	case protocol.KindStatus:
		p.status(*ev.Status)
	case protocol.KindEvents:
		if ev.Approval == "" || !p.policyPrompt(ev) {
			p.agentLine(ev.Data)
		}
	case protocol.KindRaw:
		p.line(p.paint(styleDim, "raw│ ") + sanitize(trimEOL(ev.Data), false))
	case protocol.KindInput:
		p.input(ev)
	case protocol.KindEgress:
		p.egress(ev)
	case protocol.KindTool:
		p.tool(ev.Data)
	default:
		p.line(p.paint(styleDim, string(ev.Kind)+"│ ") + sanitize(trimEOL(ev.Data), false))
	}
	return p.err
}

// toolShown bounds what a tool line shows of its arguments or answer.
const toolShown = 200

// tool renders a host tool call or its answer (docs/tools.md).
func (p *eventPrinter) tool(data []byte) {
	var m protocol.ToolMessage
	if err := json.Unmarshal(data, &m); err != nil {
		p.line(p.paint(styleDim, "tool│ ") + sanitize(trimEOL(data), false))
		return
	}
	head := fmt.Sprintf("tool › %s #%d ", m.Name, m.Call)
	shown := func(b []byte) string {
		s := sanitize(b, false)
		if len(s) > toolShown {
			s = strings.ToValidUTF8(s[:toolShown], "") + "…"
		}
		return s
	}
	switch {
	case m.Phase == "call":
		p.line(p.paint(styleCyan, head) + shown(m.Args))
	case m.Error != "":
		p.line(p.paint(styleCyan, head) + p.paint(styleRed, "✗ "+shown([]byte(m.Error))))
	case m.Result != nil:
		p.line(p.paint(styleCyan, head) + "→ " + shown([]byte(*m.Result)))
	}
}

// finish ends a line left open by streamed text.
func (p *eventPrinter) finish() {
	if p.midLine {
		p.write([]byte("\n"))
		p.midLine = false
	}
}

func (p *eventPrinter) write(b []byte) {
	if p.err == nil {
		_, p.err = p.w.Write(b)
	}
}

// line prints s as a whole line, after ending any streamed text.
func (p *eventPrinter) line(s string) {
	p.finish()
	p.write([]byte(s + "\n"))
}

// inline prints streamed text as it comes.
func (p *eventPrinter) inline(s string) {
	if s == "" {
		return
	}
	p.write([]byte(s))
	p.midLine = !strings.HasSuffix(s, "\n")
}

func (p *eventPrinter) paint(style, s string) string {
	if !p.color {
		return s
	}
	return style + s + styleReset
}

func (p *eventPrinter) status(st protocol.Status) {
	style := styleCyan
	switch st.Status {
	case protocol.StatusSucceeded:
		style = styleGreen
	case protocol.StatusCancelled:
		style = styleYellow
	case protocol.StatusFailed, protocol.StatusTimeout, protocol.StatusLost:
		style = styleRed
	}
	var b strings.Builder
	b.WriteString(p.paint(style, "● "+sanitize([]byte(st.Status), false)))
	field := func(k, v string) {
		if v != "" {
			fmt.Fprintf(&b, " %s=%s", k, sanitize([]byte(v), false))
		}
	}
	b.WriteString(" ")
	field("worker", st.Worker)
	field("node", st.Node)
	if st.Epoch != 0 {
		field("epoch", fmt.Sprint(st.Epoch))
	}
	if st.Attempt > 1 {
		field("attempt", fmt.Sprint(st.Attempt))
	}
	if st.ExitCode != nil {
		field("exit", fmt.Sprint(*st.ExitCode))
	}
	field("signal", st.Signal)
	field("reason", st.Reason)
	p.line(strings.TrimRight(b.String(), " "))
	if st.Status.Terminal() {
		p.outputs(st)
		p.checkpoint(st)
	}
	if st.Status.Terminal() && st.StderrTail != "" {
		p.line(p.paint(styleDim, "  stderr:"))
		for _, l := range strings.Split(strings.TrimRight(st.StderrTail, "\n"), "\n") {
			p.line(p.paint(styleDim, "    "+sanitize([]byte(l), false)))
		}
	}
}

// checkpoint says, under a session's run's terminal status, what its
// checkpoint holds, or why there is none.
func (p *eventPrinter) checkpoint(st protocol.Status) {
	switch c := st.Checkpoint; {
	case c != nil:
		kind := "what changed"
		if c.Base {
			kind = "the whole tree"
		}
		p.line(p.paint(styleDim, fmt.Sprintf("  session %s: checkpoint %s, %d files (%s), storing %s",
			sanitize([]byte(st.Session), false), sanitize([]byte(c.Object), false), c.Files, byteSize(c.TreeBytes), kind)))
	case st.CheckpointError != "":
		p.line(p.paint(styleYellow, "  session "+sanitize([]byte(st.Session), false)+": no checkpoint: "+sanitize([]byte(st.CheckpointError), false)))
	}
}

// listedOutputs bounds the outputs a terminal status line lists by name.
const listedOutputs = 8

// outputs lists, under a terminal status, what the run's capture stored
// and how to get it.
func (p *eventPrinter) outputs(st protocol.Status) {
	if len(st.Outputs) > 0 {
		p.line(p.paint(styleDim, fmt.Sprintf("  outputs (%d; baton outputs %s --get NAME):", len(st.Outputs), sanitize([]byte(st.RunID), false))))
		for i, o := range st.Outputs {
			if i == listedOutputs {
				p.line(p.paint(styleDim, fmt.Sprintf("    … and %d more", len(st.Outputs)-i)))
				break
			}
			name := strings.TrimPrefix(o.Name, st.RunID+"/")
			if o.Path != "" {
				name = "files/" + o.Path
			}
			p.line(p.paint(styleDim, fmt.Sprintf("    %s  %s", sanitize([]byte(name), false), byteSize(int64(o.Size)))))
		}
	}
	if st.OutputsError != "" {
		p.line(p.paint(styleYellow, "  outputs cut short: "+sanitize([]byte(st.OutputsError), false)))
	}
	for _, n := range st.OutputsNotes {
		p.line(p.paint(styleDim, "  outputs: "+sanitize([]byte(n), false)))
	}
}

// input shows a user message sent to the agent (stream-json, or a plain
// text line) as the user's turn; other input, such as a control_response,
// as it was written.
// egress prints a connection the sandbox's proxy decided, in a line:
// allowed with its bytes each way, or refused and why. What the agent
// chose (the host, the reason quoting it) is sanitized.
func (p *eventPrinter) egress(ev client.Event) {
	e := ev.Egress
	switch {
	case e == nil:
		p.line(p.paint(styleDim, "egress│ ") + sanitize(trimEOL(ev.Data), false))
		return
	case e.Note != "":
		p.line(p.paint(styleDim, "egress: "+sanitize([]byte(e.Note), false)))
		return
	}
	where := sanitize([]byte(fmt.Sprintf("%s %s", e.Method, net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port))))), false)
	if !e.Allowed {
		p.line(p.paint(styleRed, "egress ✗ "+where+" refused: "+sanitize([]byte(e.Reason), false)))
		return
	}
	s := fmt.Sprintf("egress ✓ %s ↑ %s ↓ %s in %v", where, byteSize(e.BytesOut), byteSize(e.BytesIn), time.Duration(e.DurationMs)*time.Millisecond)
	if e.Secret != "" {
		s += ", secret " + sanitize([]byte(e.Secret), false)
	}
	if e.Reason != "" {
		s += " (" + sanitize([]byte(e.Reason), false) + ")"
	}
	p.line(p.paint(styleDim, s))
}

func (p *eventPrinter) input(ev client.Event) {
	line := trimEOL(ev.Data)
	switch {
	case ev.InputKind == protocol.InputKindDecision || ev.InputKind == protocol.InputKindFollowUp:
		p.decision(ev)
		return
	case ev.Interrupt:
		p.line(p.paint(styleBold+styleYellow, "you › interrupt"))
		return
	case len(line) == 0 && ev.EOF:
		p.line(p.paint(styleDim, "you › end of input (the agent's stdin is closed)"))
		return
	}
	if id, allow, why, ok := policy.Answered(line); ok {
		if p.prompts != nil {
			p.prompts.resolve(id)
		}
		word := "deny"
		if allow {
			word = "allow"
		}
		s := "you › " + word + " " + idText(id)
		if !allow && why != "" {
			s += ": " + sanitize([]byte(why), false)
		}
		p.line(p.paint(styleBold, s))
	} else {
		p.userLine(line)
	}
	if ev.EOF {
		p.line(p.paint(styleDim, "you › end of input (the agent's stdin is closed)"))
	}
}

// jobInput shows the job's input as the run's first turn: its first line,
// and how many more it has.
func (p *eventPrinter) jobInput(input string) {
	if p.json {
		return // the payloads are the chain's, and the job's input is not on it
	}
	first, rest, _ := strings.Cut(strings.TrimSuffix(input, "\n"), "\n")
	p.userLine([]byte(first))
	if rest != "" {
		p.line(p.paint(styleDim, fmt.Sprintf("  … and %d more lines of input", strings.Count(rest, "\n")+1)))
	}
}

// userLine shows an input line: a user message as the user's turn, other
// lines as written.
func (p *eventPrinter) userLine(line []byte) {
	var m struct {
		Type    string `json:"type"`
		Message *struct {
			Content json.RawMessage `json:"content"`
		} `json:"message"`
	}
	text, ok := "", false
	switch {
	case !json.Valid(line):
		text, ok = string(line), len(line) > 0
	case json.Unmarshal(line, &m) == nil && m.Type == "user" && m.Message != nil:
		if json.Unmarshal(m.Message.Content, &text) == nil {
			ok = true
		} else if blocks, isBlocks := parseBlocks(m.Message.Content); isBlocks {
			for _, b := range blocks {
				if b.Type == "text" {
					text += b.Text
					ok = true
				}
			}
		}
	}
	if !ok {
		p.line(p.paint(styleDim, "input│ ") + sanitize(line, false))
		return
	}
	p.line(p.paint(styleBold, "you › ") + sanitize([]byte(text), false))
}

// agentMsg is the part of an agent's NDJSON line (Claude Code stream-json)
// that the printer summarizes; anything else is printed as compact JSON.
type agentMsg struct {
	Type    string `json:"type"`
	Subtype string `json:"subtype"`
	Event   *struct {
		Type  string `json:"type"`
		Delta *struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"delta"`
	} `json:"event"`
	Message *struct {
		Content json.RawMessage `json:"content"`
	} `json:"message"`
	// Response is a control_response's: the agent's answer to a control
	// request sent to it (an interrupt line).
	Response     *controlResponse `json:"response"`
	IsError      bool             `json:"is_error"`
	NumTurns     int              `json:"num_turns"`
	DurationMS   float64          `json:"duration_ms"`
	TotalCostUSD float64          `json:"total_cost_usd"`
}

type contentBlock struct {
	Type     string          `json:"type"`
	Text     string          `json:"text"`
	Thinking string          `json:"thinking"`
	Name     string          `json:"name"`
	Input    json.RawMessage `json:"input"`
	Content  json.RawMessage `json:"content"`
	IsError  bool            `json:"is_error"`
}

func (p *eventPrinter) agentLine(data []byte) {
	line := trimEOL(data)
	if !json.Valid(line) {
		// Not JSON after all (the worker files such lines under raw); show it as one.
		p.line(p.paint(styleDim, "raw│ ") + sanitize(line, false))
		return
	}
	p.reader.Observe(line)
	if r, ok := p.reader.Request(line); ok {
		p.approval(r)
		return
	}
	if id, withdrawn, ok := policy.Settled(line); ok {
		p.settled(id, withdrawn)
		return
	}
	var m agentMsg
	_ = json.Unmarshal(line, &m) // a line of another shape leaves m empty: shown as JSON below
	switch {
	case m.Type == "stream_event" && m.Event != nil:
		// Partial-message events: only text deltas carry something to read.
		if m.Event.Type == "content_block_delta" && m.Event.Delta != nil && m.Event.Delta.Type == "text_delta" {
			p.inline(sanitize([]byte(m.Event.Delta.Text), true))
			p.streamed = true
		}
		return
	case m.Type == "assistant" && m.Message != nil:
		if blocks, ok := parseBlocks(m.Message.Content); ok {
			p.assistant(blocks)
			return
		}
	case m.Type == "user" && m.Message != nil:
		if blocks, ok := parseBlocks(m.Message.Content); ok && hasToolResult(blocks) {
			p.toolResults(blocks)
			return
		} else if ok && p.notes(blocks) {
			return
		}
	case m.Type == "control_response" && m.Response != nil:
		p.controlResponse(*m.Response)
		return
	case m.Type == "result":
		p.result(m)
		return
	case m.Type == "system":
		if p.systemLine(line) {
			return
		}
	case strings.HasPrefix(m.Type, "thread.") || strings.HasPrefix(m.Type, "turn.") || strings.HasPrefix(m.Type, "item.") || m.Type == "error":
		if p.codexEvent(line) { // codex exec --json
			return
		}
	}
	p.line(compactJSON(line))
}

// approval shows a permission prompt as one line: the tool, what it asks
// to do, and how to answer.
func (p *eventPrinter) approval(r policy.Request) {
	what := toolSummary(r.Input)
	if r.Agent == policy.Codex {
		// The command, or the paths, the policy matched; a file change
		// whose item was not seen shows its params (its reason).
		what = cut(sanitize([]byte(strings.ReplaceAll(r.Target, "\n", ", ")), false), 200)
		if r.Target == "" {
			what = toolSummary(r.Input)
		}
	}
	how := "  [request " + idText(r.ID) + "]"
	if p.prompts != nil {
		p.prompts.add(r)
		how = "  (y: allow, n [why]: deny)"
	}
	p.line(p.paint(styleBold+styleYellow, "? "+sanitize([]byte(r.Tool), false)+" asks: ") + what + p.paint(styleDim, how))
}

// settled shows that the agent no longer waits on permission prompt id:
// withdrawn (an interrupt ended its turn), or settled by an answer.
func (p *eventPrinter) settled(id json.RawMessage, withdrawn bool) {
	if p.prompts != nil {
		p.prompts.resolve(id)
	}
	if withdrawn {
		p.line(p.paint(styleYellow, "? request "+idText(id)+" withdrawn: the agent no longer waits for its answer"))
		return
	}
	p.line(p.paint(styleDim, "  request "+idText(id)+" settled"))
}

// controlResponse is the agent's answer to a control request written to its
// stdin, such as Claude Code's interrupt line.
type controlResponse struct {
	Subtype   string          `json:"subtype"`
	RequestID json.RawMessage `json:"request_id"`
	Error     string          `json:"error"`
}

func (p *eventPrinter) controlResponse(r controlResponse) {
	if r.Subtype == "error" || r.Error != "" {
		p.line(p.paint(styleRed, "↳ the agent refused request "+idText(r.RequestID)+": "+sanitize([]byte(r.Error), false)))
		return
	}
	p.line(p.paint(styleDim, "↳ the agent took request "+idText(r.RequestID)))
}

// notes shows the text of a user message the agent printed itself, such as
// Claude Code's "[Request interrupted by user]", and reports whether the
// message was only text.
func (p *eventPrinter) notes(blocks []contentBlock) bool {
	for _, b := range blocks {
		if b.Type != "text" {
			return false
		}
	}
	for _, b := range blocks {
		p.line(p.paint(styleDim, "↳ "+sanitize([]byte(b.Text), false)))
	}
	return len(blocks) > 0
}

func parseBlocks(raw json.RawMessage) ([]contentBlock, bool) {
	var blocks []contentBlock
	if json.Unmarshal(raw, &blocks) != nil {
		return nil, false
	}
	return blocks, true
}

func hasToolResult(blocks []contentBlock) bool {
	for _, b := range blocks {
		if b.Type == "tool_result" {
			return true
		}
	}
	return false
}

func (p *eventPrinter) assistant(blocks []contentBlock) {
	for _, b := range blocks {
		switch b.Type {
		case "text":
			if !p.streamed { // else it was shown delta by delta already
				p.finish()
				p.inline(sanitize([]byte(b.Text), true))
				p.finish()
			}
		case "thinking":
			p.line(p.paint(styleDim, "✻ "+cut(sanitize([]byte(b.Thinking), false), 120)))
		case "tool_use":
			p.line(p.paint(styleBlue, "→ "+sanitize([]byte(b.Name), false)+": ") + toolSummary(b.Input))
		default:
			raw, _ := json.Marshal(b)
			p.line(compactJSON(raw))
		}
	}
	p.streamed = false
}

func (p *eventPrinter) toolResults(blocks []contentBlock) {
	for _, b := range blocks {
		if b.Type != "tool_result" {
			continue
		}
		word, style := "result", styleDim
		if b.IsError {
			word, style = "error", styleRed
		}
		p.line(p.paint(style, fmt.Sprintf("← %s (%d bytes)", word, len(resultText(b.Content)))))
	}
}

func (p *eventPrinter) result(m agentMsg) {
	word, style := "done", styleGreen
	if m.IsError {
		word, style = "error", styleRed
	}
	var b strings.Builder
	b.WriteString(p.paint(styleBold+style, "■ "+word))
	if m.Subtype != "" {
		b.WriteString(" " + sanitize([]byte(m.Subtype), false))
	}
	if m.NumTurns > 0 {
		fmt.Fprintf(&b, "  turns=%d", m.NumTurns)
	}
	if m.DurationMS > 0 {
		fmt.Fprintf(&b, "  %.1fs", m.DurationMS/1000)
	}
	if m.TotalCostUSD > 0 {
		fmt.Fprintf(&b, "  $%.4f", m.TotalCostUSD)
	}
	p.line(b.String())
}

// toolSummary is the one argument that says what a tool call does, or its
// input as compact JSON.
func toolSummary(input json.RawMessage) string {
	var fields map[string]json.RawMessage
	if json.Unmarshal(input, &fields) == nil {
		for _, k := range []string{"command", "file_path", "pattern", "path", "url", "query", "description", "prompt"} {
			var s string
			if json.Unmarshal(fields[k], &s) == nil && s != "" {
				return cut(sanitize([]byte(s), false), 200)
			}
		}
	}
	return cut(compactJSON(input), 200)
}

// resultText is a tool result's content: a string, or text blocks.
func resultText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []contentBlock
	if json.Unmarshal(raw, &blocks) == nil {
		var b strings.Builder
		for _, bl := range blocks {
			b.WriteString(bl.Text)
		}
		return b.String()
	}
	return string(raw)
}

// compactJSON is raw on one line, made safe for a terminal.
func compactJSON(raw []byte) string {
	var buf bytes.Buffer
	if json.Compact(&buf, raw) == nil {
		raw = buf.Bytes()
	}
	return sanitize(raw, false)
}

func trimEOL(b []byte) []byte {
	b = bytes.TrimSuffix(b, []byte("\n"))
	return bytes.TrimSuffix(b, []byte("\r"))
}

// sanitize makes agent output safe to print on a terminal: invalid UTF-8
// bytes become \xNN and control characters (escape sequences could rewrite
// the screen or the window title) become escapes. With keepLines, newlines
// and tabs pass, for text meant to flow.
func sanitize(b []byte, keepLines bool) string {
	var out strings.Builder
	out.Grow(len(b))
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&out, `\x%02x`, b[0])
		case keepLines && (r == '\n' || r == '\t'):
			out.WriteRune(r)
		case r == '\n':
			out.WriteString(`\n`)
		case r == '\t':
			out.WriteString(`\t`)
		case r == '\r':
			out.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&out, `\x%02x`, r)
		case r >= 0x80 && r < 0xa0, r == 0x2028, r == 0x2029:
			fmt.Fprintf(&out, `\u%04x`, r)
		default:
			out.WriteRune(r)
		}
		b = b[size:]
	}
	return out.String()
}

// cut shortens s to at most n runes, marking the cut with an ellipsis.
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
