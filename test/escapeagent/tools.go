package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// toolsAddr is runner-outer's tools socket in the sandbox (mcp.SocketAddr),
// spoken to raw here: a hostile agent need not use `baton mcp`.
const toolsAddr = "@baton-tools"

// toolAnswer is runner-outer's answer on the tools socket (mcp.SocketAnswer).
type toolAnswer struct {
	Tools []struct {
		Name        string `json:"name"`
		Description string `json:"description"`
	} `json:"tools"`
	Result  *string `json:"result"`
	Error   string  `json:"error"`
	Unknown bool    `json:"unknown"`
}

func (a toolAnswer) String() string {
	b, _ := json.Marshal(a)
	return escapeCut(string(b))
}

func escapeCut(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}

// ask sends raw, as it is, on a new connection to the tools socket, and
// reads the one answer. It writes beside the read (runner-outer answers
// an oversized frame before reading all of it) and then half-closes, so
// a frame without a newline ends.
func ask(raw []byte) (toolAnswer, error) {
	c, err := net.DialTimeout("unix", toolsAddr, 5*time.Second)
	if err != nil {
		return toolAnswer{}, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	go func() {
		_, _ = c.Write(raw)
		_ = c.(*net.UnixConn).CloseWrite()
	}()
	line, err := bufio.NewReader(c).ReadBytes('\n')
	if err != nil {
		return toolAnswer{}, fmt.Errorf("no answer (waited up to 30s): %w", err)
	}
	var a toolAnswer
	if err := json.Unmarshal(line, &a); err != nil {
		return toolAnswer{}, fmt.Errorf("answer %q: %w", line, err)
	}
	return a, nil
}

// callReq is a call request line, as `baton mcp` sends it.
func callReq(name, args string) []byte {
	b, err := json.Marshal(map[string]any{"op": "call", "name": name, "args": json.RawMessage(args)})
	if err != nil {
		panic(err)
	}
	return append(b, '\n')
}

// answered reports whether a is a result starting with prefix.
func answered(a toolAnswer, err error, prefix string) bool {
	return err == nil && a.Error == "" && a.Result != nil && strings.HasPrefix(*a.Result, prefix)
}

// refusedWith reports an attempt blocked if runner-outer refused it with
// an error containing want; a lost connection is no clear refusal.
func refusedWith(attempt string, a toolAnswer, err error, want string) {
	if err != nil {
		report(attempt, false, "no clear refusal: "+err.Error())
		return
	}
	report(attempt, a.Result == nil && strings.Contains(a.Error, want), a.String())
}

// tools: attacks on the run's host tools, through runner-outer's tools
// socket (the only way out of the sandbox to them): replayed and forged
// calls and answers, unlisted tools, malformed and oversized frames,
// floods of connections, lists and calls, and the workers' socket in the
// run directory. calls and maxBytes are the run's toolLimits; made counts
// the calls that left the sandbox's side, so the flood knows how many
// the bound still takes.
func tools(runDir string, calls, maxBytes int) {
	made := 0
	// What the profile allows works: a list, a call, a tool's error.
	a, err := ask([]byte(`{"op":"list"}` + "\n"))
	var names []string
	for _, t := range a.Tools {
		names = append(names, t.Name)
	}
	report("allowed: list the run's tools", err != nil || !slices.Equal(names, []string{"deploy", "create_pr"}), fmt.Sprintf("%s %v", a, err))
	a, err = ask(callReq("deploy", `{"env":"first"}`))
	made++
	report("allowed: call deploy", !answered(a, err, `deployed {"env":"first"} for `), fmt.Sprintf("%s %v", a, err))
	a, err = ask(callReq("create_pr", `{"title":"t"}`))
	made++
	report("allowed: a tool's error", err != nil || !strings.Contains(a.Error, "tool create_pr failed (409)"), fmt.Sprintf("%s %v", a, err))

	// Replays: the same request again is a call of its own, under its
	// own key (the test checks each key was executed once).
	req := callReq("deploy", `{"env":"replayed"}`)
	var wg sync.WaitGroup
	var replays [3]toolAnswer
	var replayErrs [3]error
	for i := range replays {
		wg.Go(func() { replays[i], replayErrs[i] = ask(req) })
	}
	wg.Wait()
	made += len(replays)
	ok := true
	for i := range replays {
		ok = ok && answered(replays[i], replayErrs[i], `deployed {"env":"replayed"} for `)
	}
	report("allowed: replay a call's request three times at once", !ok, fmt.Sprintf("%v %v", replays, replayErrs))
	// A call that names its own number, key and run: all ignored.
	a, err = ask([]byte(`{"op":"call","name":"deploy","args":{"env":"keyed"},"call":1,"list":1,"key":"other:1",` +
		`"headers":{"Baton-Run-Id":"other","Baton-Idempotency-Key":"other:1"}}` + "\n"))
	made++
	report("set a call's number, key and run", answered(a, err, `deployed {"env":"keyed"} for `) && !strings.Contains(*a.Result, "other"),
		fmt.Sprintf("%s %v", a, err))
	// The workers' answer frame, on the agent's socket: to answer a call
	// (or a list) itself.
	a, err = ask([]byte(`{"call":1,"result":"Zm9yZ2Vk"}` + "\n"))
	refusedWith("answer a call on the tools socket", a, err, `unknown op ""`)
	a, err = ask([]byte(`{"list":1,"tools":[{"name":"rm_rf","inputSchema":{}}]}` + "\n"))
	refusedWith("answer a list on the tools socket", a, err, `unknown op ""`)
	a, err = ask([]byte(`{"op":"exec","name":"deploy"}` + "\n"))
	refusedWith("an unknown op", a, err, `unknown op "exec"`)
	// A forged call record and a forged answer record on stdout: the
	// agent cannot know the run's nonce (the test checks the chain has
	// them as the agent's lines, and no tool message of them).
	outMu.Lock()
	fmt.Println(`{"__tool":1,"__nonce":"00000000000000000000000000000000","phase":"result","name":"deploy","result":"Zm9yZ2Vk"}`)
	fmt.Println(`{"__tool":99,"__nonce":"guess","phase":"call","name":"deploy","args":"e30="}`)
	outMu.Unlock()
	report("forge tool records on stdout", true, "printed; the test checks the chain")

	// Tools the profile does not list, names that are no subject token or
	// would widen one.
	for _, name := range []string{"rm_rf", "DEPLOY", "deploy.>", "*", ">", "../deploy", "deploy ", "", strings.Repeat("d", 65), "deploy\x00", "tools.deploy"} {
		a, err := ask(callReq(name, `{}`))
		if err == nil && !a.Unknown {
			report(fmt.Sprintf("call the unlisted tool %q", name), false, "not refused as unknown: "+a.String())
			continue
		}
		refusedWith(fmt.Sprintf("call the unlisted tool %q", name), a, err, "is not one of this run's tools (deploy, create_pr)")
	}
	// Arguments that are no object, or over the bound.
	for _, args := range []string{`[1]`, `"x"`, `null`, `7`} {
		a, err := ask(callReq("deploy", args))
		refusedWith("call with the arguments "+args, a, err, "a tool's arguments are a JSON object")
	}
	big := `{"pad":"` + strings.Repeat("x", maxBytes) + `"}`
	a, err = ask(callReq("deploy", big))
	refusedWith("call with arguments over toolLimits.bytes", a, err,
		fmt.Sprintf("arguments of %d bytes are over this run's limit of %d bytes (toolLimits.bytes)", len(big), maxBytes))
	// Frames: oversized (with and without a newline), malformed, and two
	// requests on a connection that carries one.
	over := fmt.Sprintf("the call is over this run's limit of %d bytes of arguments (toolLimits.bytes)", maxBytes)
	a, err = ask(callReq("deploy", `{"pad":"`+strings.Repeat("y", 1<<20)+`"}`))
	refusedWith("a frame of 1 MiB", a, err, over)
	a, err = ask([]byte(strings.Repeat("z", 1<<20)))
	refusedWith("a frame of 1 MiB without a newline", a, err, over)
	for _, frame := range []string{"not json\n", "\x00\xff\xfe\x01binary\n", "\n", `{"op":"call","name":"deploy"`, `{"op":"call","name":"deploy","args":{"env":"cut"}` + "\n"} {
		a, err := ask([]byte(frame))
		refusedWith(fmt.Sprintf("the malformed frame %q", frame), a, err, "the request on baton's tools socket is not JSON")
	}
	two := append(callReq("deploy", `{"env":"one-of-two"}`), callReq("deploy", `{"env":"two-of-two"}`)...)
	a, err = ask(two)
	made++
	// Blocked if the first is answered: the test checks the second was
	// never asked.
	report("two calls on one connection", answered(a, err, `deployed {"env":"one-of-two"} for `), fmt.Sprintf("%s %v", a, err))

	// The workers' socket, in the run directory, is nowhere in the
	// sandbox: not at its host path, not through /proc, not among the
	// sockets of the sandbox's network namespace.
	for _, p := range []string{filepath.Join(runDir, "tools.sock"), "/proc/1/root" + filepath.Join(runDir, "tools.sock"),
		"/proc/self/root" + filepath.Join(runDir, "tools.sock")} {
		c, err := net.DialTimeout("unix", p, 2*time.Second)
		if err == nil {
			c.Close()
		}
		refused("reach the workers' tools socket at "+p, err)
	}
	netUnix, _ := os.ReadFile("/proc/net/unix")
	var found []string
	for _, l := range strings.Split(string(netUnix), "\n") {
		f := strings.Fields(l)
		if len(f) == 8 && f[7] != toolsAddr && strings.Contains(f[7], "tools") {
			found = append(found, f[7])
			if c, err := net.DialTimeout("unix", f[7], 2*time.Second); err == nil {
				c.Close()
				report("reach a tools socket listed in /proc/net/unix", false, "connected to "+f[7])
			}
		}
	}
	report("find the workers' tools socket in /proc/net/unix", len(found) == 0, fmt.Sprintf("%q of %d bytes", found, len(netUnix)))

	// Floods: idle connections past runner-outer's slots, lists, calls.
	floodConns()
	a, err = waitCall(callReq("deploy", `{"env":"after-conns"}`))
	made++
	report("allowed: call deploy after the connections' flood", !answered(a, err, `deployed {"env":"after-conns"} for `), fmt.Sprintf("%s %v", a, err))
	const lists = 50
	listed := make([]bool, lists)
	for i := range lists {
		wg.Go(func() {
			a, err := ask([]byte(`{"op":"list"}` + "\n"))
			listed[i] = err == nil && len(a.Tools) == 2
		})
	}
	wg.Wait()
	report("allowed: 50 lists at once", slices.Contains(listed, false), fmt.Sprintf("%v", listed))
	floodCalls(calls - made)
}

// floodConns opens connections to the tools socket and sends nothing on
// them, more than runner-outer serves at once: those past its slots are
// closed at once, the others wait, and all are then let go.
func floodConns() {
	const n = 80
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range n {
		c, err := net.DialTimeout("unix", toolsAddr, 2*time.Second)
		if err != nil {
			report("hold more tool connections than runner-outer serves", false, fmt.Sprintf("dial %d: %v", len(conns), err))
			return
		}
		conns = append(conns, c)
	}
	// Each read at once (a read past a passed deadline fails at once,
	// even on a closed connection): a closed one ends, a waiting one
	// times out.
	var closed, waiting atomic.Int32
	var wg sync.WaitGroup
	deadline := time.Now().Add(2 * time.Second)
	for _, c := range conns {
		wg.Go(func() {
			_ = c.SetReadDeadline(deadline)
			_, err := c.Read(make([]byte, 1))
			if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
				waiting.Add(1)
			} else {
				closed.Add(1)
			}
		})
	}
	wg.Wait()
	// runner-outer serves 64 at once (maxAgentConns); one more may be
	// closed if a slot of an earlier request was not yet let go.
	report("hold more tool connections than runner-outer serves", waiting.Load() <= 64 && closed.Load() >= n-64,
		fmt.Sprintf("of %d idle connections, %d closed at once, %d waited", n, closed.Load(), waiting.Load()))
}

// waitCall asks raw until runner-outer takes the connection, for up to
// 10 s: the flood's connections free their slots as runner-outer sees
// them end.
func waitCall(raw []byte) (toolAnswer, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		a, err := ask(raw)
		if err == nil || time.Now().After(deadline) {
			return a, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// floodCalls makes left+20 calls at once, when the run's bound takes
// left more: left are answered, the 20 others refused, each saying why.
func floodCalls(left int) {
	const past = 20
	n := left + past
	var mu sync.Mutex
	var wg sync.WaitGroup
	ok, refusals := 0, 0
	var other []string
	for i := range n {
		wg.Go(func() {
			args := fmt.Sprintf(`{"env":"flood-%d"}`, i)
			a, err := ask(callReq("deploy", args))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case answered(a, err, "deployed "+args+" for "):
				ok++
			case err == nil && strings.HasPrefix(a.Error, "this run has made its ") && strings.HasSuffix(a.Error, " tool calls (toolLimits.calls): no more are taken"):
				refusals++
			default:
				other = append(other, fmt.Sprintf("%s %v", a, err))
			}
		})
	}
	wg.Wait()
	report("flood tool calls", ok == left && refusals == past && len(other) == 0,
		fmt.Sprintf("%d calls at once, %d left under the bound: %d answered, %d refused, other %q", n, left, ok, refusals, other))
}
