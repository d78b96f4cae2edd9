package stage

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"

	"golang.org/x/sys/unix"

	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/sandbox/internal/chain"
)

// listenInput makes the run's input socket (0600): runner-outer calls it
// while it may still be root, so only the worker can connect.
func listenInput(dir journal.Dir) (*net.UnixListener, error) {
	return listenWorker(dir, chain.InputSocketPath, "input")
}

// listenTools makes the run's tools socket (0600), as listenInput does
// the input socket.
func listenTools(dir journal.Dir) (*net.UnixListener, error) {
	return listenWorker(dir, chain.ToolsSocketPath, "tools")
}

// listenWorker makes one of the run directory's sockets for the worker.
func listenWorker(dir journal.Dir, socketPath func(journal.Dir) (*os.File, string, error), what string) (*net.UnixListener, error) {
	d, path, err := socketPath(dir)
	if err != nil {
		return nil, fmt.Errorf("open the run directory: %w", err)
	}
	defer d.Close()
	// One left there is a runner's that ended, this one holding the run's
	// lock: a prestarted chain's whose take never came, now respawned cold.
	if fi, err := os.Lstat(path); err == nil && fi.Mode().Type() == fs.ModeSocket {
		_ = os.Remove(path)
	}
	old := unix.Umask(0o177)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	unix.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("listen on the %s socket: %w", what, err)
	}
	// The file stays when the runner ends (it may no longer unlink it):
	// a worker's dial is then refused.
	ln.SetUnlinkOnClose(false)
	return ln, nil
}

// serveInput takes the worker's connections until ln is closed. One
// message is written at a time, whichever connection it came on.
func (o *outerRun) serveInput(ln *net.UnixListener) {
	record := func(r journal.InputRecord) error { return o.jw.Insert(r.Line()) }
	for {
		c, err := ln.AcceptUnix()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				o.st.fail("input-accept", err)
			}
			return
		}
		go func() {
			defer c.Close()
			if err := o.stdin.serveInputConn(c, record, o.spec.Nonce); err != nil {
				o.st.fail("input", err)
			}
		}()
	}
}
