package test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/internal/bounded"
	"github.com/batonhq/baton/internal/testenv"
)

var (
	natsBuildOnce sync.Once
	natsBin       string
	natsBuildErr  error
	natsBuildOut  []byte
)

// natsServerBinary builds nats-server from the module baton's tests depend
// on (NATS_SERVER_BIN overrides it), so the chaos suite restarts a real
// server process.
func natsServerBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("NATS_SERVER_BIN"); p != "" {
		return p
	}
	natsBuildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "nats-server-bin-")
		if err != nil {
			natsBuildErr = err
			return
		}
		natsBin = filepath.Join(dir, "nats-server")
		cmd := exec.Command("go", "build", "-o", natsBin, "github.com/nats-io/nats-server/v2")
		natsBuildOut, natsBuildErr = testenv.Build(cmd)
	})
	if natsBuildErr != nil {
		t.Fatalf("build nats-server: %v\n%s", natsBuildErr, natsBuildOut)
	}
	return natsBin
}

// natsProc is one nats-server process that can be stopped and started
// again on the same port and store.
type natsProc struct {
	t     *testing.T
	bin   string
	name  string
	port  int
	mport int // monitoring port
	noJS  bool
	args  []string
	dir   string
	cmd   *exec.Cmd
	done  chan struct{} // closed when cmd has been waited for
	log   *os.File
	mu    sync.Mutex
	alive bool
}

func (p *natsProc) url() string { return fmt.Sprintf("nats://127.0.0.1:%d", p.port) }

func (p *natsProc) start() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	args := []string{"-a", "127.0.0.1", "-p", fmt.Sprint(p.port), "-n", p.name}
	if !p.noJS {
		args = append(args, "-js", "-sd", p.dir)
	}
	args = append(args, p.args...)
	p.cmd = exec.Command(p.bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	p.cmd.WaitDelay = bounded.WaitDelay
	if err := p.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	p.alive = true
	cmd, done := p.cmd, make(chan struct{})
	p.done = done
	go func() { _ = cmd.Wait(); close(done) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", p.port), time.Second)
		if err == nil {
			c.Close()
			return
		}
		select {
		case <-done:
			p.alive = false
			p.t.Fatalf("nats-server %s exited (%v) before listening on %d; its log ends:\n%s", p.name, cmd.ProcessState, p.port, logTail(p.log, 2000))
		default:
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("nats-server %s did not listen on %d within 20 s; its log ends:\n%s", p.name, p.port, logTail(p.log, 2000))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// logTail is the last n bytes of the log f writes to.
func logTail(f *os.File, n int64) string {
	if f == nil {
		return "(no log)"
	}
	b, err := os.ReadFile(f.Name())
	if err != nil {
		return err.Error()
	}
	return string(b[max(0, int64(len(b))-n):])
}

// stop ends the server with sig and waits for it.
func (p *natsProc) stop(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.alive {
		return
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	p.alive = false
}

// startNATS starts n nats-server processes; with n > 1 they form a
// JetStream cluster on loopback.
func startNATS(t *testing.T, n int) []*natsProc {
	t.Helper()
	bin := natsServerBinary(t)
	base := t.TempDir()
	var procs []*natsProc
	var routes []string
	cports := make([]int, n)
	for i := range n {
		cports[i] = testenv.FreePort(t)
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", cports[i]))
	}
	for i := range n {
		logf, err := os.Create(filepath.Join(base, fmt.Sprintf("nats-%d.log", i)))
		if err != nil {
			t.Fatal(err)
		}
		p := &natsProc{t: t, bin: bin, name: fmt.Sprintf("n%d", i), port: testenv.FreePort(t), mport: testenv.FreePort(t), dir: filepath.Join(base, fmt.Sprintf("store-%d", i)), log: logf}
		p.args = []string{"-m", fmt.Sprint(p.mport)}
		if n > 1 {
			p.args = append(p.args, "--cluster_name", "C", "--cluster", fmt.Sprintf("nats://127.0.0.1:%d", cports[i]), "--routes", strings.Join(routes, ","))
		}
		procs = append(procs, p)
	}
	for _, p := range procs {
		p.start()
	}
	t.Cleanup(func() {
		for _, p := range procs {
			p.stop(syscall.SIGTERM)
			p.log.Close()
		}
	})
	// JetStream is ready once a meta leader answers account info.
	nc, js := clientOf(t, procs)
	defer nc.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := js.AccountInfo(ctx)
		cancel()
		if err == nil {
			return procs
		}
		if time.Now().After(deadline) {
			t.Fatalf("JetStream not ready: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func urls(procs []*natsProc) string {
	var u []string
	for _, p := range procs {
		u = append(u, p.url())
	}
	return strings.Join(u, ",")
}

func clientOf(t *testing.T, procs []*natsProc) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(urls(procs), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond),
		nats.RetryOnFailedConnect(true))
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// workerProc is a `baton worker` process of one node that the chaos suite
// kills and restarts; each incarnation logs to its own file. Like systemd
// with deploy/baton-worker.service (Restart=always, RestartSec=1s), it
// starts a worker again a second after it exits by itself (a worker exits
// when it cannot provision, as while NATS elects a leader).
type workerProc struct {
	t         *testing.T
	name      string
	node      string
	args      []string
	bin       string
	logDir    string
	mu        sync.Mutex
	cmd       *exec.Cmd
	done      chan struct{}
	restarts  int
	stopped   bool // by stop, until start
	selfExits int
	lives     []*workerLife // every incarnation, for the gaps' trace
}

// workerLife is one process of a workerProc: when it was spawned and when
// it had exited (zero while it runs), and its log.
type workerLife struct {
	pid             int
	spawned, exited time.Time
	log             string
}

func (w *workerProc) start() {
	w.t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = false
	if err := w.spawnLocked(); err != nil {
		w.t.Fatal(err)
	}
}

// waitLog waits, within bound, for a line of the worker's current log
// that holds every one of parts.
func (w *workerProc) waitLog(bound time.Duration, parts ...string) {
	w.t.Helper()
	deadline := time.Now().Add(bound)
	for {
		file := w.logName() // the worker may have restarted meanwhile
		b, _ := os.ReadFile(file)
		for line := range strings.Lines(string(b)) {
			if containsAll(line, parts) {
				return
			}
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("worker %s logged no line with %q within %v; its log %s ends:\n%s", w.name, parts, bound, file, lastLines(file, 20))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// logName is the file of the worker's current log.
func (w *workerProc) logName() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return filepath.Join(w.logDir, fmt.Sprintf("%s.%d.log", w.name, w.restarts))
}

func (w *workerProc) spawnLocked() error {
	w.restarts++
	logName := filepath.Join(w.logDir, fmt.Sprintf("%s.%d.log", w.name, w.restarts))
	logf, err := os.Create(logName)
	if err != nil {
		return err
	}
	cmd := exec.Command(w.bin, w.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.WaitDelay = bounded.WaitDelay
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	life := &workerLife{pid: cmd.Process.Pid, spawned: time.Now(), log: logName}
	w.lives = append(w.lives, life)
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		w.mu.Lock()
		life.exited = time.Now()
		w.mu.Unlock()
		close(done)
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.cmd != cmd || w.stopped {
			return
		}
		w.selfExits++
		time.AfterFunc(time.Second, func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			if w.cmd == cmd && !w.stopped {
				if err := w.spawnLocked(); err != nil {
					w.t.Errorf("restart worker %s: %v", w.name, err)
				}
			}
		})
	}()
	w.cmd, w.done = cmd, done
	return nil
}

func (w *workerProc) pid() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cmd.Process.Pid
}

// stop signals the worker and waits for it to exit.
func (w *workerProc) stop(sig syscall.Signal) time.Duration {
	w.mu.Lock()
	cmd, done := w.cmd, w.done
	w.stopped = true
	w.mu.Unlock()
	if cmd == nil {
		return 0
	}
	start := time.Now()
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		// SIGQUIT first: the Go runtime writes every goroutine's stack
		// to the worker's log, which says where it was stuck.
		_ = cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		w.t.Errorf("worker %s ignored %v for 30s; its goroutines are at the end of its log, %s", w.name, sig, w.logName())
	}
	return time.Since(start)
}

func lastLines(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
