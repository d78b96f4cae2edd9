package escape

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/protocol"
)

// escapeGit is the git profile's side of the test host: git http-backend
// over HTTPS (a certificate of a CA the profile names as its upstreamCA),
// serving repo.git to requests with the Basic credential of the secret's
// value only, and recording the credentials it saw.
type escapeGit struct {
	port   int
	root   string // git http-backend's GIT_PROJECT_ROOT
	token  string // the secret's value
	master string // the commits of repo.git's branches
	feat   string
	mu     sync.Mutex
	auths  []string // each request's Authorization header
}

func (g *escapeGit) url(repo string) string {
	return "https://" + escapeName + ":" + strconv.Itoa(g.port) + "/" + repo
}

func (g *escapeGit) seen() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.auths...)
}

// newEscapeGit makes repo.git (main: two commits; feature: a third with
// feature.txt), serves it on the test host and adds the profile "git" to
// cfg: /bin/sh -c, diff outputs, the secret GIT_TOKEN (Basic) for
// escapeName.
func newEscapeGit(t *testing.T, host *testenv.TestHost, cfg *config.Config) *escapeGit {
	t.Helper()
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	g := &escapeGit{token: "ghs-" + hex.EncodeToString(b) + "-" + escapeSecretMarker}
	dir := t.TempDir()
	g.root = dir
	git := func(wd string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"}, args...)...)
		cmd.Dir, cmd.Env = wd, []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1"}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	work := filepath.Join(dir, "work")
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(work, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git(dir, "init", "-q", "work")
	write("README.md", "first\n")
	git(work, "add", ".")
	git(work, "commit", "-q", "-m", "one")
	write("README.md", "hello from repo.git\n")
	if err := os.Mkdir(filepath.Join(work, "src"), 0o755); err != nil {
		t.Fatal(err)
	}
	write("src/tool.sh", "#!/bin/sh\necho tool\n")
	git(work, "add", ".")
	git(work, "commit", "-q", "-m", "two")
	g.master = git(work, "rev-parse", "HEAD")
	git(work, "checkout", "-q", "-b", "feature")
	write("feature.txt", "on the feature branch\n")
	git(work, "add", ".")
	git(work, "commit", "-q", "-m", "three")
	g.feat = git(work, "rev-parse", "HEAD")
	git(work, "checkout", "-q", "main")
	git(dir, "clone", "-q", "--bare", "work", "repo.git")

	caPEM, cert := escapeTestCA(t, escapeName)
	caFile := filepath.Join(dir, "git-ca.pem")
	if err := os.WriteFile(caFile, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	backend := &cgi.Handler{Path: "/usr/lib/git-core/git-http-backend",
		Env: []string{"GIT_PROJECT_ROOT=" + dir, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1", "HOME=" + dir}}
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+g.token))
	l, err := testenv.ListenIn(host.NetNS, net.JoinHostPort(host.Addr.String(), "0"))
	if err != nil {
		t.Fatalf("listen in %s: %v", host.NetNS, err)
	}
	g.port = l.Addr().(*net.TCPAddr).Port
	srv := &http.Server{
		Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			g.mu.Lock()
			g.auths = append(g.auths, r.Header.Get("Authorization"))
			g.mu.Unlock()
			if r.Header.Get("Authorization") != want {
				rw.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				rw.WriteHeader(http.StatusUnauthorized)
				return
			}
			backend.ServeHTTP(rw, r)
		}),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}},
		ErrorLog:  log.New(io.Discard, "", 0),
	}
	go func() { _ = srv.Serve(tls.NewListener(l, srv.TLSConfig)) }()
	t.Cleanup(func() { _ = srv.Close() })

	cfg.Profiles["git"] = config.Profile{Command: []string{"/bin/sh", "-c"}, AllowArgs: config.AnyArgs, Timeout: 2 * time.Minute,
		Limits:  config.Limits{Pids: escapePids},
		Outputs: config.Outputs{Diff: true},
		Network: config.Network{
			Allow: []string{escapeName, host.Prefix.String()},
			Hosts: map[string]string{escapeName: host.Addr.String()},
		},
		Secrets:    map[string]config.Secret{"GIT_TOKEN": {Value: g.token, Hosts: []string{escapeName}, Header: "basic"}},
		UpstreamCA: caFile,
	}
	return g
}

// TestGitWorkspace: a job's workspace.git is cloned, through the run's
// egress, before its agent starts: the agent finds the files of the ref,
// one commit deep, and no credential anywhere it can read, while the git
// server received the secret's value; the run's diff is against the
// cloned commit. A ref that does not exist fails the run, and a host off
// the allowlist, a URL with a credential or a non-https scheme sends the
// job to the DLQ, each with a reason naming the repository.
func TestGitWorkspace(t *testing.T) {
	w := newEscapeWorld(t)
	g := w.git
	id := "git-ws"
	script := `set -u
echo "readme: $(cat README.md)"
echo "feature: $(cat feature.txt)"
echo "commits: $(git rev-list --count HEAD)"
echo "head: $(git rev-parse HEAD)"
test -f .git/shallow && echo "shallow: yes"
echo "origin: $(git remote get-url origin)"
printf '%s-value\n' baton-test-secret > /dev/shm/pattern
for f in $(grep -rlsa -f /dev/shm/pattern /etc /home /workspace /tmp /run /proc/[0-9]*/environ /proc/[0-9]*/cmdline); do echo "value in $f"; done
for f in $(grep -rlsa -e "Authorization" -e "baton-secret-" /workspace/.git); do echo "credential in $f"; done
echo "changed by the agent" >> README.md
rm src/tool.sh
echo new > added.txt
echo done`
	w.submit(map[string]any{"runId": id, "profile": "git", "args": []string{script},
		"workspace": map[string]any{"git": map[string]any{"url": g.url("repo.git"), "ref": "feature"}}})
	r := w.wait(t, id, 90*time.Second)
	escapeSucceeded(t, r)
	out := string(r.journal)
	t.Logf("journal:\n%s", out)
	for _, want := range []string{
		"readme: hello from repo.git", "feature: on the feature branch", "commits: 1", "head: " + g.feat,
		"shallow: yes", "origin: " + g.url("repo.git"), "done",
	} {
		if !strings.Contains("\n"+out, "\n"+want+"\n") {
			t.Errorf("the journal lacks %s", want)
		}
	}
	for _, bad := range []string{"value in ", "credential in "} {
		if strings.Contains(out, bad) {
			t.Errorf("ESCAPE: the agent found %q", bad)
		}
	}
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+g.token))
	auths := g.seen()
	if len(auths) == 0 || auths[0] != basic {
		t.Errorf("the git server saw %q, want the secret's value from the first request", auths)
	}
	for _, a := range auths {
		if a != basic {
			t.Errorf("the git server saw the credential %q", a)
		}
	}
	if !strings.Contains(r.state, `"phase":"git-clone","status":"ok","detail":"`+g.feat+`"`) {
		t.Errorf("state.ndjson does not record the cloned commit %s:\n%s", g.feat, r.state)
	}
	spec := w.file(id, "spec.json")
	for what, text := range map[string]string{"journal": out, "events": string(r.events), "state.ndjson": r.state, "status": r.status.Reason} {
		if strings.Contains(text, g.token) {
			t.Errorf("the %s holds the secret's value", what)
		}
	}
	if !strings.Contains(spec, g.token) {
		t.Error("the spec lacks the secret's value")
	}

	// The diff: the agent's changes against the cloned commit, without
	// .git.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	obs, err := w.js.ObjectStore(ctx, w.names.OutputsBucket())
	if err != nil {
		t.Fatal(err)
	}
	patch, err := obs.GetBytes(ctx, id+"/diff.patch")
	if err != nil {
		t.Fatalf("the run's diff: %v (outputs error %q)", err, r.status.OutputsError)
	}
	t.Logf("diff.patch:\n%s", patch)
	for _, want := range []string{"+++ b/README.md", " hello from repo.git\n+changed by the agent\n", "--- a/src/tool.sh", "-echo tool\n", "+++ b/added.txt", "+new\n"} {
		if !strings.Contains(string(patch), want) {
			t.Errorf("the diff lacks %q", want)
		}
	}
	for _, bad := range []string{".git/", "feature.txt"} {
		if strings.Contains(string(patch), bad) {
			t.Errorf("the diff holds %q: not against the cloned commit", bad)
		}
	}

	// A ref the repository lacks fails the run, naming both.
	w.submit(map[string]any{"runId": "git-noref", "profile": "git", "args": []string{"echo agent ran"},
		"workspace": map[string]any{"git": map[string]any{"url": g.url("repo.git"), "ref": "nope"}}})
	nr := w.wait(t, "git-noref", 60*time.Second)
	t.Logf("a missing ref: %s: %s", nr.status.Status, nr.status.Reason)
	if nr.status.Status != protocol.StatusFailed || !strings.Contains(nr.status.Reason, g.url("repo.git")) ||
		!strings.Contains(nr.status.Reason, `ref "nope" does not exist`) || strings.Contains(string(nr.journal), "agent ran") {
		t.Errorf("a missing ref: status %s, reason %q, journal %q", nr.status.Status, nr.status.Reason, nr.journal)
	}

	// A repository larger than the job's disk limit fails the run.
	bigRepo(t, g.root, 24<<20)
	w.submit(map[string]any{"runId": "git-big", "profile": "git", "args": []string{"echo agent ran"}, "limits": map[string]string{"disk": "16MiB"},
		"workspace": map[string]any{"git": map[string]any{"url": g.url("big.git")}}})
	br := w.wait(t, "git-big", 90*time.Second)
	t.Logf("a repository over the disk limit: %s: %s", br.status.Status, br.status.Reason)
	if br.status.Status != protocol.StatusFailed || !strings.Contains(br.status.Reason, g.url("big.git")) ||
		!strings.Contains(br.status.Reason, "limits.disk") || strings.Contains(string(br.journal), "agent ran") {
		t.Errorf("a repository over the disk limit: status %s, reason %q, journal %q", br.status.Status, br.status.Reason, br.journal)
	}

	// Jobs that cannot be cloned go to the DLQ, with a reason.
	for runID, c := range map[string]struct{ url, reason, want string }{
		"git-refused": {"https://refused.escape.test/repo.git", string(protocol.ReasonNotAllowed), `host "refused.escape.test" is not on profile "git"'s network.allow`},
		"git-userinfo": {"https://x-access-token:" + g.token + "@" + escapeName + "/repo.git", string(protocol.ReasonInvalid),
			"must not carry a credential"},
		"git-ssh": {"ssh://" + escapeName + "/repo.git", string(protocol.ReasonInvalid), "must be https://"},
	} {
		w.submit(map[string]any{"runId": runID, "profile": "git", "args": []string{"true"},
			"workspace": map[string]any{"git": map[string]any{"url": c.url}}})
		m := w.dlqEntry(t, runID, 20*time.Second)
		reason, msg := m.Headers().Get(protocol.HeaderReason), m.Headers().Get(protocol.HeaderError)
		t.Logf("%s: DLQ %s: %s", runID, reason, msg)
		if reason != c.reason || !strings.Contains(msg, c.want) || !strings.Contains(msg, "repo.git") || strings.Contains(msg, g.token) {
			t.Errorf("%s: DLQ reason %q, error %q; want %s, %q naming the repository, no credential", runID, reason, msg, c.reason, c.want)
		}
	}
}

// dlqEntry waits up to timeout for the DLQ entry of runID's job.
func (w *escapeWorld) dlqEntry(t *testing.T, runID string, timeout time.Duration) jetstream.Msg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c, err := w.js.OrderedConsumer(ctx, w.names.DLQStream(), jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for {
		m, err := c.Next(jetstream.FetchMaxWait(time.Until(escapeDeadline(ctx))))
		if err != nil {
			t.Fatalf("no DLQ entry for the job of %s after %v: %v", runID, timeout, err)
		}
		if m.Headers().Get(protocol.HeaderRunID) == runID {
			return m
		}
	}
}

// bigRepo makes root/big.git, one commit of a file of size random bytes
// (which no compression shrinks).
func bigRepo(t *testing.T, root string, size int) {
	t.Helper()
	work := filepath.Join(t.TempDir(), "big")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, size)
	_, _ = rand.Read(b)
	if err := os.WriteFile(filepath.Join(work, "blob.bin"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "."}, {"commit", "-q", "-m", "big"}, {"clone", "-q", "--bare", ".", filepath.Join(root, "big.git")}} {
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"}, args...)...)
		cmd.Dir, cmd.Env = work, []string{"PATH=" + os.Getenv("PATH"), "HOME=" + work, "GIT_CONFIG_NOSYSTEM=1"}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
}
