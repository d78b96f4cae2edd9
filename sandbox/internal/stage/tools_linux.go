package stage

import (
	"errors"
	"net"
)

// maxAgentConns bounds the agent's connections to the tools socket at
// once: each is one list or call, waiting.
const maxAgentConns = 64

// serveTools serves the tools sockets, the agent's and the workers', until
// they are closed; with no tools, it does nothing.
func (o *outerRun) serveTools() error {
	if o.tools == nil || o.toolsAgent == nil {
		return nil
	}
	f := o.toolsAgent
	o.toolsAgent = nil
	ln, err := net.FileListener(f)
	f.Close()
	if err != nil {
		return err
	}
	b := newToolBroker(*o.spec.Tools, o.spec.Nonce, o.jw.Insert)
	go o.acceptTools(o.tools, "tools-worker", func(c net.Conn) error { return b.serveWorker(c) }, 0)
	// What the agent sends is its own affair: its connections' errors are
	// not the run's, and not recorded (a flood would fill state.ndjson).
	go o.acceptTools(ln, "tools-agent", func(c net.Conn) error { _ = b.serveAgent(c); return nil }, maxAgentConns)
	o.st.ok("tools", "serving "+mcpSocketNote(o.spec.Tools.Names))
	return nil
}

// acceptTools serves ln's connections until ln is closed, at most slots at
// once (0: no bound); a connection past them is closed at once.
func (o *outerRun) acceptTools(ln net.Listener, phase string, serve func(net.Conn) error, slots int) {
	var sem chan struct{}
	if slots > 0 {
		sem = make(chan struct{}, slots)
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				o.st.fail(phase, err)
			}
			return
		}
		if sem != nil {
			select {
			case sem <- struct{}{}:
			default:
				c.Close()
				continue
			}
		}
		go func() {
			defer c.Close()
			if sem != nil {
				defer func() { <-sem }()
			}
			if err := serve(c); err != nil {
				o.st.fail(phase, err)
			}
		}()
	}
}
