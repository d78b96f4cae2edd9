package stage

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/batonhq/baton/journal"
)

// supervise copies the agent's stdout into the journal until the chain
// has ended, stopping it on the deadline, a cancel or a signal, then ends
// the journal with the sentinel. With inner nil it is runner-outer-wait's:
// runner-inner has handed the sandbox's init over already (o.init).
//
// The services (the journal's copy, the status pipe's reader, stdin, the
// input socket, the tools sockets, the egress proxy) start once runner-inner has exited, or
// earlier on a stop: with none running yet, runner-outer then re-execs
// itself to shed its setup's heap (handOver), and they start in the
// fresh process.
func (o *outerRun) supervise(ctx context.Context, inner *innerProc, sigs chan os.Signal) error {
	if o.input != nil {
		// No input after the chain has ended: the journal is being ended.
		defer o.input.Close()
	}
	if o.tools != nil {
		// No answers after the chain has ended either.
		defer o.tools.Close()
	}
	s := newSupervisor(ctx, o, inner, sigs)
	defer s.stopDeadline()
	s.begin()
	for s.copying || s.running {
		s.next()
	}
	return s.end()
}

// supervisor is supervise's state, from the chain's start (or its hand
// over) to the sentinel. Its loop (next) waits on the channels below; it
// does not wait on a nil one (no such event, or it came and was handled).
type supervisor struct {
	o     *outerRun
	ctx   context.Context // the runner's: its end is a stop (serveEgress keeps its values only)
	inner *innerProc      // nil in runner-outer-wait and once a pooled chain was taken
	sigs  chan os.Signal
	out   outcome // what the sentinel is decided from (outcome.sentinel)

	// The services' ends, once serving (serve).
	serving      bool
	copied       chan error      // the journal's copy of the agent's stdout
	reported     chan statusRead // the status pipe, read to its end
	stderrCopied chan struct{}   // closed when the agent's stderr is copied

	deadlineTimer *time.Timer // nil with no deadline
	deadline      <-chan time.Time
	grace         <-chan time.Time // armed by a stop, for the kill
	ctxDone       <-chan struct{}
	pastaDone     <-chan error
	innerDone     <-chan error
	initDone      <-chan syscall.WaitStatus

	// initExit is the init's wait status, once initEnded.
	initExit  syscall.WaitStatus
	initEnded bool
	// The loop runs until both are false: copying until the journal's copy
	// has ended, running until the chain has (the init ended, or none
	// came).
	copying, running bool
}

func newSupervisor(ctx context.Context, o *outerRun, inner *innerProc, sigs chan os.Signal) *supervisor {
	s := &supervisor{
		o: o, ctx: ctx, inner: inner, sigs: sigs,
		out:          outcome{grace: o.spec.Grace()},
		copied:       make(chan error, 1),
		reported:     make(chan statusRead, 1),
		stderrCopied: make(chan struct{}),
		ctxDone:      ctx.Done(),
		copying:      true,
		running:      true,
	}
	if !o.spec.Deadline.IsZero() {
		s.deadlineTimer = time.NewTimer(time.Until(o.spec.Deadline))
		s.deadline = s.deadlineTimer.C
	}
	if o.net != nil {
		s.pastaDone = o.net.pastaDone
	}
	return s
}

func (s *supervisor) stopDeadline() {
	if s.deadlineTimer != nil {
		s.deadlineTimer.Stop()
	}
}

// begin waits for runner-inner to hand the init over, or, with the init
// here already, serves and watches it at once.
func (s *supervisor) begin() {
	if s.inner != nil {
		s.innerDone = s.inner.done
		return
	}
	s.serve()
	s.watchInit()
}

// next waits for one event and acts on it.
func (s *supervisor) next() {
	select {
	case err := <-s.pastaDone:
		s.pastaExited(err)
	case err := <-s.copied:
		s.copyEnded(err)
	case err := <-s.innerDone:
		s.innerExited(err)
	case ws := <-s.initDone:
		s.initExited(ws)
	case <-s.deadline:
		s.stop(stopRequest{reason: journal.ReasonTimeout, detail: "deadline " + s.o.spec.Deadline.Format(time.RFC3339Nano)})
	case <-s.ctxDone:
		s.ctxDone = nil
		s.stop(stopRequest{reason: journal.ReasonSignal, signal: "TERM", detail: "context ended"})
	case sig := <-s.sigs:
		s.onSignal(sig)
	case <-s.grace:
		s.grace = nil
		s.kill(fmt.Sprintf("grace period %v elapsed", s.out.grace))
	}
}

// serve starts the services, once.
func (s *supervisor) serve() {
	if s.serving {
		return
	}
	s.serving = true
	o := s.o
	go s.copyJournal()
	go func() { s.reported <- readChainStatus(o.status) }()
	go s.copyStderrLog()
	o.startStdin()
	if o.input != nil {
		go o.serveInput(o.input)
	}
	if err := o.serveTools(); err != nil {
		// The agent's calls would never be answered: the run ends as an
		// error that says why.
		o.st.fail("tools", err)
		s.fail("tools: " + err.Error())
	}
	if err := o.serveEgress(s.ctx); err != nil {
		// The agent's traffic has no way out: the run ends as an
		// error that says why.
		o.st.fail("egress", err)
		s.fail("egress: " + err.Error())
	}
}

// copyJournal copies the agent's stdout into the journal, to its end.
func (s *supervisor) copyJournal() {
	n, err := s.o.jw.ReadFrom(s.o.stdout)
	if err == nil {
		s.o.st.ok("journal-copy", fmt.Sprintf("%d bytes", n))
	}
	s.copied <- err
}

// copyStderrLog copies the agent's stderr into stderr.log within
// limits.stderr, to its end.
func (s *supervisor) copyStderrLog() {
	defer close(s.stderrCopied)
	limit := s.o.spec.Limits.StderrBytes()
	n, err := copyStderr(newStderrLog(s.o.stderr, limit), s.o.stderrPipe)
	if err != nil {
		s.o.st.fail("stderr-copy", fmt.Errorf("after %d bytes: %w", n, err))
	} else if n > int64(limit) {
		s.o.st.ok("stderr-copy", fmt.Sprintf("%d bytes, the last %d..%d kept (limits.stderr)", n, limit/2, limit))
	}
}

// fail ends the run as an error that says why, the host side of the
// sandbox having failed; the first failure is the one named.
func (s *supervisor) fail(why string) {
	if s.out.failure == "" {
		s.out.failure = why
		s.o.killChain(s.inner)
	}
}

// stop asks the agent to stop (SIGTERM), the first time, for r's reason,
// and arms the grace period after which it is killed.
func (s *supervisor) stop(r stopRequest) {
	s.serve()
	if s.out.stop.reason != "" {
		return
	}
	s.out.stop = r
	s.o.st.ok("stop", r.detail)
	// The sandbox's init sends it to the agent's process group.
	_ = s.o.request(unix.SIGTERM)
	s.grace = time.After(s.out.grace)
}

// kill kills the chain, the first time, for why.
func (s *supervisor) kill(why string) {
	s.serve()
	if s.out.killed {
		return
	}
	s.out.killed = true
	s.o.st.ok("kill", why)
	s.o.killChain(s.inner)
}

// onSignal acts on a signal the runner received.
func (s *supervisor) onSignal(sig os.Signal) {
	switch sig {
	case unix.SIGUSR1:
		s.stop(stopRequest{reason: journal.ReasonCancel, detail: "cancel requested (SIGUSR1)"})
	case unix.SIGUSR2:
		// The worker saw the agent wait for input past its
		// profile's idleTimeout.
		s.stop(stopRequest{reason: journal.ReasonTimeout, detail: IdleReason})
	case unix.SIGTERM, unix.SIGINT:
		name := signalName(sig.(syscall.Signal))
		s.stop(stopRequest{reason: journal.ReasonSignal, signal: name, detail: "runner received SIG" + name})
	default:
		s.o.st.ok("signal", "ignored "+sig.String())
	}
}

// pastaExited acts on pasta's end.
func (s *supervisor) pastaExited(err error) {
	s.serve()
	s.pastaDone = nil
	if err == nil {
		// It quits cleanly when the namespace it served is gone.
		s.o.st.ok("pasta-exit", "exit status 0")
		return
	}
	// Failing, it leaves the agent's CIDR traffic no way out:
	// the run ends as an error that says why.
	why := s.o.net.pastaFailure(err)
	s.o.st.fail("pasta-exit", errors.New(why))
	if s.running {
		s.fail(why)
	}
}

// copyEnded acts on the end of the journal's copy: the agent's stdout
// closed, the output limit reached, or the journal failed.
func (s *supervisor) copyEnded(err error) {
	s.copying = false
	switch {
	case errors.Is(err, journal.ErrOutputLimit):
		s.outputLimitReached(err)
	case err != nil:
		// The journal cannot take the agent's output: end the run
		// rather than let the agent block on a full pipe.
		s.out.journalErr = err
		s.o.st.fail("journal-copy", err)
		s.o.stdout.Close()
		s.kill("the journal failed")
	}
}

// outputLimitReached kills the agent at once: a grace period would only
// let it print more for nobody.
func (s *supervisor) outputLimitReached(err error) {
	s.out.outputLimit = int64(s.o.spec.Limits.Output)
	s.o.st.fail("journal-copy", err)
	if s.running {
		// Killed with its stdout still open: closed first,
		// the agent could die of SIGPIPE and report that
		// before the SIGKILL lands. The pipe closes in end.
		s.o.killChain(s.inner)
	} else {
		s.o.stdout.Close()
	}
}

// innerExited acts on runner-inner's end: it has handed the init over,
// or the chain never started one.
func (s *supervisor) innerExited(err error) {
	s.innerDone = nil
	why, ok := s.o.takeInit(err)
	if !ok {
		// runner-inner failed before the sandbox ran (and said why
		// on the status pipe), or died.
		s.running = false
		s.out.chainErr = why
		// An init whose pidfd never came ends with this pipe.
		s.o.ctl.Close()
		s.serve()
		return
	}
	if s.mayHandOver() {
		// Returns only if this runner stays: then on with the
		// signals it took meanwhile.
		for _, sig := range s.o.handOver(s.sigs) {
			s.onSignal(sig)
		}
	}
	s.serve()
	s.watchInit()
}

// mayHandOver says whether runner-outer may exec runner-outer-wait now:
// only with no service started (nothing in flight to lose across the
// exec) and nothing decided yet about the run's end. A stop, a kill and
// a failure each start the services first, so !serving implies the
// rest; they are spelled out as the reasons.
func (s *supervisor) mayHandOver() bool {
	return !s.serving && s.out.stop.reason == "" && !s.out.killed && s.out.failure == ""
}

// watchInit watches the sandbox's init for its end, and kills it if the
// run was to be killed before it came: the kill could not reach it then.
func (s *supervisor) watchInit() {
	// awaitTake's, when it watched the init already.
	s.initDone = s.o.initDone
	var err error
	if s.initDone == nil {
		s.initDone, err = s.o.init.wait()
	}
	if err != nil {
		s.o.st.fail("init", err)
		s.out.chainErr = err.Error()
		s.o.killChain(s.inner)
		s.running = false
	} else if s.out.killed || s.out.outputLimit > 0 {
		s.o.killChain(s.inner)
	}
}

// initExited acts on the init's end, the chain's.
func (s *supervisor) initExited(ws syscall.WaitStatus) {
	s.initDone = nil
	s.running = false
	s.initEnded, s.initExit = true, ws
	s.out.chainErr = describeWait(ws)
	s.o.st.ok("init-exit", s.out.chainErr)
}

// end, the chain having ended, gathers how, and ends the journal with
// the sentinel.
func (s *supervisor) end() error {
	o := s.o
	o.stdout.Close()
	o.ctl.Close()
	s.recordStatus(s.collectStatus())
	if o.disk != nil {
		s.out.diskFull = full(o.disk)
		o.disk.Close()
	}
	// The sandbox is gone: the proxy's last connections end now, their
	// records before the sentinel.
	o.stopEgress()
	sentinel := s.out.sentinel(o.spec.Nonce)
	if sentinel.Reason == journal.ReasonError {
		fmt.Fprintf(o.stderr, "baton runner: %s\n", sentinel.Detail)
	}
	return o.finish(sentinel)
}

// collectStatus waits for the status pipe's reader and the agent's
// stderr, which close with the chain, and says what the chain reported.
func (s *supervisor) collectStatus() statusRead {
	r := <-s.reported
	// The chain is gone, and every writer of the agent's stderr with it.
	select {
	case <-s.stderrCopied:
	case <-time.After(stderrDrain):
		s.o.st.fail("stderr-copy", fmt.Errorf("the agent's stderr still open %v after its sandbox ended: closed", stderrDrain))
	}
	s.o.stderrPipe.Close()
	if r.status == nil && s.initEnded {
		r = initUnreported(r, s.initExit, s.out.chainErr)
	}
	return r
}

// recordStatus adds what the chain reported to the outcome.
func (s *supervisor) recordStatus(r statusRead) {
	if r.err != nil {
		s.o.st.fail("status", r.err)
		s.out.chainErr += "; " + r.err.Error()
	} else if r.status != nil {
		s.out.status = r.status
		s.o.st.ok("status", strings.TrimSpace(string(r.status.line())))
	}
}

// stderrDrain bounds the wait for the agent's stderr to close once its
// sandbox has ended (at once: every process that held it is dead).
const stderrDrain = 5 * time.Second
