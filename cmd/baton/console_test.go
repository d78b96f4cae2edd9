package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"

	"github.com/batonhq/baton/console"
	"github.com/batonhq/baton/internal/testenv"
)

func TestConsoleCommandRefusesInsecureListen(t *testing.T) {
	e := newCLIEnv(t)
	for _, addr := range []string{"0.0.0.0:0", ":0"} {
		_, _, err := e.run("", "console", "--listen", addr)
		if !errors.Is(err, console.ErrInsecureListen) {
			t.Errorf("--listen %s: %v, want ErrInsecureListen", addr, err)
		}
	}
	if _, _, err := e.run("", "console", "--tls-cert", "x.pem"); err == nil || !strings.Contains(err.Error(), "--tls-key") {
		t.Errorf("--tls-cert alone: %v", err)
	}
}

// TestConsoleCommandServes starts `baton console` with a generated token:
// the printed URL logs the browser in, the API takes the token, and the
// command ends when its context does.
func TestConsoleCommandServes(t *testing.T) {
	e := newCLIEnv(t)
	t.Setenv("BATON_CONSOLE_TOKEN", "")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	line, _, done := startConsole(t, ctx, e.url)
	u, ok := strings.CutPrefix(line, "baton console: ")
	if !ok || !strings.Contains(u, "/?token=") {
		t.Fatalf("printed %q, want the URL with its token", line)
	}
	tok := u[strings.Index(u, "token=")+len("token="):]
	base := u[:strings.Index(u, "/?")]
	noFollow := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 {
		t.Fatalf("the printed URL: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	for _, auth := range []struct {
		header string
		want   int
	}{{"", 401}, {"Bearer " + tok, 200}} {
		req, _ := http.NewRequest("GET", base+"/api/runs", nil)
		if auth.header != "" {
			req.Header.Set("Authorization", auth.header)
		}
		resp, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != auth.want {
			t.Fatalf("api with %q: %d, want %d", auth.header, resp.StatusCode, auth.want)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("console after its context ended: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("console did not stop within 10s of its context")
	}
}

// startConsole runs `baton --nats natsURL console` on a free port until
// ctx ends. It returns the first line the console printed (its URL), its
// stderr's lines, and its end.
func startConsole(t *testing.T, ctx context.Context, natsURL string) (string, <-chan string, <-chan error) {
	t.Helper()
	root := newRootCmd()
	pr, pw := io.Pipe()
	er, ew := io.Pipe()
	root.SetOut(pw)
	root.SetErr(ew)
	root.SetArgs([]string{"--nats", natsURL, "console", "--listen", "127.0.0.1:0"})
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx); pw.Close(); ew.Close() }()
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		if sc.Scan() {
			lines <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	errLines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(er)
		for sc.Scan() {
			select {
			case errLines <- sc.Text():
			default: // nobody reads them: drop
			}
		}
		_, _ = io.Copy(io.Discard, er)
	}()
	select {
	case line := <-lines:
		return line, errLines, done
	case err := <-done:
		t.Fatalf("console ended: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("console printed no URL within 20s")
	}
	return "", nil, nil
}

// TestConsoleCommandWithoutNATS: against a port nothing listens on, the
// console fails at once, naming the URL, instead of printing its own URL
// and serving pages that cannot read anything.
func TestConsoleCommandWithoutNATS(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "nats://" + ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(io.Discard)
	root.SetArgs([]string{"--nats", closed, "console", "--listen", "127.0.0.1:0"})
	start := time.Now()
	err = root.ExecuteContext(ctx)
	if err == nil || !strings.HasPrefix(err.Error(), "cannot reach NATS at "+closed+": ") {
		t.Fatalf("console against %s: %v, want \"cannot reach NATS at %s: ...\"", closed, err, closed)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the console took %v to fail", d)
	}
	if out.Len() > 0 {
		t.Errorf("the console printed %q before failing", out.String())
	}
}

// TestConsoleCommandNATSGoesAway: when NATS goes away under a running
// console, it says so on stderr, its API says NATS cannot be reached, and
// it says when NATS is back.
func TestConsoleCommandNATSGoesAway(t *testing.T) {
	dir := t.TempDir()
	s := testenv.RunServerIn(t, dir, -1)
	port := s.Addr().(*net.TCPAddr).Port
	t.Setenv("BATON_CONSOLE_TOKEN", "the-token")
	ctx, cancel := context.WithCancel(t.Context())
	line, stderr, done := startConsole(t, ctx, s.ClientURL())
	defer func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("the console did not stop within 10s of its context")
		}
	}()
	base := strings.TrimSuffix(strings.TrimPrefix(line, "baton console: "), "/")
	waitLine := func(what string) {
		t.Helper()
		deadline := time.After(20 * time.Second)
		for {
			select {
			case l := <-stderr:
				if strings.Contains(l, what) {
					return
				}
			case <-deadline:
				t.Fatalf("the console's stderr said no %q within 20s", what)
			}
		}
	}
	s.Shutdown()
	s.WaitForShutdown()
	waitLine("baton console: NATS cannot be reached")
	req, _ := http.NewRequest("GET", base+"/api/dlq", nil)
	req.Header.Set("Authorization", "Bearer the-token")
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), "NATS cannot be reached") {
		t.Fatalf("the API while NATS is down: %d %s", resp.StatusCode, b)
	}
	testenv.RunServerIn(t, dir, port)
	waitLine("baton console: NATS reconnected")
}

func TestTokenCommand(t *testing.T) {
	e := newCLIEnv(t)
	key := filepath.Join(t.TempDir(), "signing.nk")
	pub, _, err := e.run("", "token", "--new-key", key)
	if err != nil || !strings.HasPrefix(pub, "A") {
		t.Fatalf("--new-key: %q %v", pub, err)
	}
	if fi, err := os.Stat(key); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	if _, _, err := e.run("", "token", "--new-key", key); err == nil {
		t.Fatal("--new-key overwrote a key")
	}
	out, _, err := e.run("", "token", "run-7", "--signing-key", key, "--ttl", "5m", "--input")
	if err != nil {
		t.Fatal(err)
	}
	uc, err := jwt.DecodeUserClaims(strings.TrimSpace(out))
	if err != nil {
		t.Fatal(err)
	}
	if uc.Issuer != strings.TrimSpace(pub) || uc.Name != "run-7" || !uc.Pub.Allow.Contains("baton.input.run-7") {
		t.Fatalf("token claims %+v", uc)
	}
	for _, args := range [][]string{
		{"token", "run-7"},                                       // no key
		{"token", "a.b", "--signing-key", key},                   // bad run id
		{"token", "run-7", "--signing-key", key, "--ttl", "48h"}, // too long
		{"token", "--signing-key", key},                          // no run
		{"token", "run-7", "--signing-key", filepath.Join(t.TempDir(), "missing")},
	} {
		t.Setenv("BATON_SIGNING_KEY_FILE", "")
		if _, _, err := e.run("", args...); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}
