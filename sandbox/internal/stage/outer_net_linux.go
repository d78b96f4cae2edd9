package stage

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/batonhq/baton/internal/bounded"
	"github.com/batonhq/baton/sandbox/internal/chain"
	"github.com/batonhq/baton/sandbox/internal/egress"
)

// Bounds of runner-outer's network setup.
const (
	socketsWait    = 10 * time.Second
	maxEgressNotes = 100 // state records of refusals per run
	// Journal records of egress per run (egressRecords), the limit's note
	// aside: at most some 800 KB of journal and chain (a record is under
	// 800 bytes, host and reason bounded).
	maxEgressRecords = 1000
	pastaStop        = time.Second
)

// outerNet is runner-outer's side of the sandbox's network.
type outerNet struct {
	pasta     *exec.Cmd
	pastaDone <-chan error
	pastaErr  *bounded.Buffer
	// socks are the proxy's listener and the DNS stub's sockets until
	// served (serveEgress).
	socks  []*os.File
	cancel context.CancelFunc
	served sync.WaitGroup
}

// startNetwork attaches pasta to runner-inner's network namespace when the
// allowlist has CIDR entries and takes the sockets runner-inner made
// there, listening already: serveEgress serves the egress sockets,
// serveTools the tools socket.
func (o *outerRun) startNetwork(ctx context.Context, inner *innerProc) error {
	n := o.net
	if n != nil && o.plan.inner.Net.Mode == chain.NetPasta {
		n.pastaErr = &bounded.Buffer{Limit: 8 << 10}
		n.pasta = &exec.Cmd{
			Path:   o.plan.pasta,
			Args:   append([]string{o.plan.pasta}, pastaArgs(inner.cmd.Process.Pid)...),
			Env:    []string{},
			Stderr: n.pastaErr,
			// pasta dies with the runner, like the rest of the chain.
			SysProcAttr: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
			// Its end is seen even if a child of it holds stderr.
			WaitDelay: bounded.WaitDelay,
		}
		done, err := startLocked(n.pasta)
		if err != nil {
			n.pasta = nil
			return fmt.Errorf("start pasta: %w", err)
		}
		n.pastaDone = done
		o.st.ok("pasta-start", strings.Join(n.pasta.Args, " "))
	}
	want := 0
	if n != nil {
		want = 3
	}
	if o.plan.inner.Tools {
		want++
	}
	socks, err := receiveSockets(o.chain, want)
	if err != nil {
		if n != nil && n.pasta != nil {
			select {
			case perr := <-n.pastaDone:
				n.pastaDone = nil
				return errors.New(n.pastaFailure(perr))
			case <-time.After(100 * time.Millisecond):
			}
		}
		return err
	}
	if o.plan.inner.Tools {
		// The tools socket comes last.
		o.toolsAgent, socks = socks[len(socks)-1], socks[:len(socks)-1]
	}
	if n != nil {
		n.socks = socks
	}
	// They listen: what the agent sends waits there until served.
	if _, err := o.chain.Write([]byte("serving")); err != nil {
		return fmt.Errorf("tell runner-inner: %w", err)
	}
	return nil
}

// serveEgress serves the proxy and the DNS stub on the sockets
// startNetwork took, until cleanup; with none, it does nothing.
func (o *outerRun) serveEgress(ctx context.Context) error {
	n := o.net
	if n == nil || n.socks == nil {
		return nil
	}
	socks := n.socks
	n.socks = nil
	defer closeAll(socks)
	proxyL, err := net.FileListener(socks[0])
	if err != nil {
		return err
	}
	dnsPC, err := net.FilePacketConn(socks[1])
	if err != nil {
		proxyL.Close()
		return err
	}
	dnsL, err := net.FileListener(socks[2])
	if err != nil {
		proxyL.Close()
		dnsPC.Close()
		return err
	}
	logf := egressNotes(o.st, maxEgressNotes)
	var sec *egress.Secrets
	if o.plan.ca != nil {
		var err error
		if sec, err = egress.NewSecrets(o.spec.Network, o.plan.ca); err != nil {
			proxyL.Close()
			dnsPC.Close()
			dnsL.Close()
			return err
		}
	}
	netCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	n.cancel = cancel
	// A record goes after what the agent printed before the connection
	// ended, which its stdout pipe may still hold; the journal holds at
	// most maxEgressRecords of them (and the limit's note) for the copy.
	stdout := o.stdout
	insert := func(line []byte) error {
		return o.jw.InsertAfter(line, func() int64 { return queuedBytes(stdout) })
	}
	record := egressRecords(insert, o.spec.Nonce, maxEgressRecords, o.st)
	proxy := egress.NewProxy(o.plan.policy, logf, egress.OnDone(record))
	if sec != nil {
		proxy.SetSecrets(sec)
	}
	dns := egress.NewDNS(o.plan.policy, logf, egress.OnRefusedQuery(record))
	n.served.Go(func() { _ = proxy.Serve(netCtx, proxyL) })
	n.served.Go(func() { _ = dns.ServeUDP(netCtx, dnsPC) })
	n.served.Go(func() { _ = dns.ServeTCP(netCtx, dnsL) })
	o.st.ok("egress", "serving the proxy on "+chain.ProxyAddr+" and the DNS stub on "+chain.DNSAddr+" inside the sandbox")
	return nil
}

// receiveSockets reads the want sockets runner-inner made in the
// sandbox's network namespace.
func receiveSockets(ctl *os.File, want int) ([]*os.File, error) {
	c, err := net.FileConn(ctl)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return nil, errors.New("the control socket is not a unix socket")
	}
	_ = uc.SetReadDeadline(time.Now().Add(socketsWait))
	buf, oob := make([]byte, 64), make([]byte, unix.CmsgSpace(want*4))
	n, oobn, _, _, err := uc.ReadMsgUnix(buf, oob)
	if err != nil {
		return nil, fmt.Errorf("wait for runner-inner's sockets: %w", err)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	var fds []int
	if err == nil && len(msgs) == 1 {
		fds, err = unix.ParseUnixRights(&msgs[0])
	}
	files := make([]*os.File, 0, len(fds))
	for _, fd := range fds {
		unix.CloseOnExec(fd)
		files = append(files, os.NewFile(uintptr(fd), "egress"))
	}
	if err != nil || string(buf[:n]) != "sockets" || len(files) != want {
		closeAll(files)
		if n == 0 {
			return nil, errors.New("runner-inner ended before it made the sandbox's sockets; see state.ndjson")
		}
		return nil, fmt.Errorf("runner-inner sent %q with %d descriptors (%v)", buf[:n], len(files), err)
	}
	// ctl's descriptor stays open in ctl: answer on it.
	return files, nil
}

func closeAll(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

// stopEgress stops the egress services and waits for their connections'
// ends, each one's egress record in the journal then; safe to call more
// than once.
func (o *outerRun) stopEgress() {
	if n := o.net; n != nil && n.cancel != nil {
		n.cancel()
		n.served.Wait()
	}
}

// cleanup stops the egress services and pasta, and releases the run's
// cgroup; safe to call more than once.
func (o *outerRun) cleanup() {
	o.stopEgress()
	if n := o.net; n != nil {
		o.net = nil
		closeAll(n.socks)
		if n.pasta != nil && n.pastaDone != nil {
			_ = n.pasta.Process.Signal(unix.SIGTERM)
			select {
			case <-n.pastaDone:
			case <-time.After(pastaStop):
				o.st.ok("pasta-stop", fmt.Sprintf("still running %v after SIGTERM: killed", pastaStop))
				_ = n.pasta.Process.Kill()
				<-n.pastaDone
			}
		}
	}
	if o.plan != nil {
		o.plan.cgroup.close()
		o.plan.cgroup = nil
	}
}

// pastaFailure says how pasta ended, with what it printed.
func (n *outerNet) pastaFailure(err error) string {
	msg := "pasta ended: " + describeExit(err)
	if out := strings.TrimSpace(n.pastaErr.String()); out != "" {
		msg += ": " + strings.Join(strings.Fields(out), " ")
	}
	return msg
}
