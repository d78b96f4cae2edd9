package stage

// The runner's end of the pool socket: a prestarted chain waits for its
// take and makes itself the run's (the worker's end is prestart_linux.go).

import (
	"context"
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/sandbox/internal/chain"
	"github.com/batonhq/baton/sandbox/runspec"
)

// takePoolSocket finds a prestarted runner's socket and removes its
// variable from the environment.
func takePoolSocket() *os.File { return inheritedFile(chain.PoolFDEnv, "pool") }

// awaitTake is a prestarted runner's wait for its take: it takes the
// sandbox's init from runner-inner (inner; nil in runner-outer-wait),
// execs runner-outer-wait as any runner does, says it is ready, and
// waits. It returns once a run has taken the chain, runner-inner having
// exited, or with an error once the chain has been abandoned: its worker
// closed the socket, the sandbox ended, a stop came. Nothing ran then,
// and no journal exists.
func (o *outerRun) awaitTake(ctx context.Context, inner *innerProc, sigs chan os.Signal) error {
	var innerDone <-chan error
	var takes chan takeRecv
	listen := func() error {
		var err error
		if o.initDone, err = o.init.wait(); err != nil {
			return err
		}
		takes = make(chan takeRecv, 1)
		go func() { takes <- recvTake(o.pool) }()
		if _, err := unix.Write(int(o.pool.Fd()), []byte(chain.PoolReady)); err != nil {
			return fmt.Errorf("tell the worker: %w", err)
		}
		o.st.ok("pool-ready", "waiting for a take")
		return nil
	}
	if inner != nil {
		innerDone = inner.done
	} else if err := listen(); err != nil {
		return o.abandonPool(nil, err)
	}
	for {
		select {
		case err := <-innerDone:
			innerDone = nil
			if why, ok := o.takeInit(err); !ok {
				if r := readChainStatus(o.status); r.status != nil && r.status.Error != "" {
					why = r.status.Error
				}
				return o.abandonPool(nil, fmt.Errorf("the sandbox did not start: %s", why))
			}
			inner = nil
			if drained := o.handOver(sigs); len(drained) > 0 {
				return o.abandonPool(nil, fmt.Errorf("%v came before a take", drained[0]))
			}
			if err := listen(); err != nil {
				return o.abandonPool(nil, err)
			}
		case t := <-takes:
			return o.take(t)
		case ws := <-o.initDone:
			why := describeWait(ws)
			if r := readChainStatus(o.status); r.status != nil && r.status.Error != "" {
				why = r.status.Error
			}
			o.initDone = nil
			return o.abandonPool(nil, fmt.Errorf("the sandbox's init ended before a take: %s", why))
		case sig := <-sigs:
			if sig == unix.SIGHUP {
				continue
			}
			return o.abandonPool(inner, fmt.Errorf("%v came before a take", sig))
		case <-ctx.Done():
			return o.abandonPool(inner, ctx.Err())
		}
	}
}

// abandonPool ends a chain no run took: it kills the sandbox (and
// runner-inner, if not yet exited) and closes the socket.
func (o *outerRun) abandonPool(inner *innerProc, err error) error {
	o.st.fail("pool", err)
	o.killChain(inner)
	if inner != nil {
		<-inner.done
	}
	o.pool.Close()
	return fmt.Errorf("runner-outer: prestarted chain abandoned: %w", err)
}

// takeRecv is a take as received: the run's spec, journal and input.
type takeRecv struct {
	spec, journal, input *os.File
	err                  error
}

// recvTake reads the worker's take from the pool socket.
func recvTake(pool *os.File) takeRecv {
	buf, oob := make([]byte, 64), make([]byte, unix.CmsgSpace(3*4))
	var n, oobn int
	var err error
	for {
		n, oobn, _, _, err = unix.Recvmsg(int(pool.Fd()), buf, oob, unix.MSG_CMSG_CLOEXEC)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		return takeRecv{err: fmt.Errorf("read the take: %w", err)}
	}
	var fds []int
	if oobn > 0 {
		msgs, perr := unix.ParseSocketControlMessage(oob[:oobn])
		if perr == nil && len(msgs) == 1 {
			fds, perr = unix.ParseUnixRights(&msgs[0])
		}
		if perr != nil {
			return takeRecv{err: fmt.Errorf("read the take: %w", perr)}
		}
	}
	if n == 0 && len(fds) == 0 {
		return takeRecv{err: errors.New("the worker let the prestarted chain go")}
	}
	if string(buf[:n]) != chain.TakeWord || len(fds) != 3 {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return takeRecv{err: fmt.Errorf("the worker sent %q with %d descriptors, want %q with 3", buf[:n], len(fds), chain.TakeWord)}
	}
	return takeRecv{spec: os.NewFile(uintptr(fds[0]), "spec"), journal: os.NewFile(uintptr(fds[1]), "journal"),
		input: os.NewFile(uintptr(fds[2]), "input")}
}

// take makes the chain the run's: the run's spec replaces the entry's,
// the journal and input are the run's, and the sandbox's init learns the
// agent's argv and environment. It answers the worker, then closes the
// socket: from here the run is any other, which outlives its worker.
func (o *outerRun) take(t takeRecv) error {
	if t.err != nil {
		return o.abandonPool(nil, t.err)
	}
	refuse := func(err error) error {
		t.spec.Close()
		t.journal.Close()
		t.input.Close()
		_, _ = unix.Write(int(o.pool.Fd()), []byte("error: "+err.Error()))
		return o.abandonPool(nil, fmt.Errorf("take refused: %w", err))
	}
	b, err := chain.ReadFile(t.spec, "the take's spec")
	if err != nil {
		return refuse(err)
	}
	s, err := runspec.Decode(b)
	switch {
	case err != nil:
		return refuse(err)
	case s.Pooled:
		return refuse(errors.New("the take's spec is a prestarted chain's"))
	}
	if err := chain.Fits(o.spec, s); err != nil {
		return refuse(err)
	}
	jw, err := journal.NewWriter(t.journal)
	if err != nil {
		return refuse(err)
	}
	jw.SetLimit(int64(s.Limits.Output))
	o.spec, o.dir, o.jw, o.stdinSrc = s, journal.Dir(s.RunDir), jw, t.input
	o.st.ok("take", specSummary(s))
	if _, err := o.ctl.Write(chain.AgentTakeOf(s).Line()); err != nil {
		// The init is gone: the run ends with its status, as any whose
		// sandbox died.
		o.st.fail("take", fmt.Errorf("tell the sandbox's init: %w", err))
	}
	_, _ = unix.Write(int(o.pool.Fd()), []byte(chain.ReadyOK))
	o.pool.Close()
	o.pool = nil
	return nil
}
