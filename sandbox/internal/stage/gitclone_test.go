package stage

import (
	"encoding/base64"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/batonhq/baton/sandbox/internal/chain"
	"github.com/batonhq/baton/sandbox/runspec"
)

// TestGitEnv: a clone's git commands get the guards and the credential in
// their environment, never in argv, and none of the agent's GIT_
// variables but the CA bundle's.
func TestGitEnv(t *testing.T) {
	agent := []string{"PATH=/usr/bin", "HOME=/home/agent", "HTTPS_PROXY=http://127.0.0.1:3128", "GIT_SSL_CAINFO=/etc/b.pem",
		"GIT_CONFIG_PARAMETERS='core.fsmonitor=evil'", "GIT_DIR=/tmp/x", "GIT_TOKEN=baton-secret-git-token-00"}
	g := &runspec.Git{URL: "https://h/r.git", Ref: "main", Depth: 1, Secret: "GIT_TOKEN"}
	env := gitEnv(agent, g)
	for _, want := range []string{"PATH=/usr/bin", "HTTPS_PROXY=http://127.0.0.1:3128", "GIT_SSL_CAINFO=/etc/b.pem", "GIT_TERMINAL_PROMPT=0",
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_ALLOW_PROTOCOL=https:http"} {
		if !slices.Contains(env, want) {
			t.Errorf("env lacks %s: %q", want, env)
		}
	}
	for _, kv := range env {
		if strings.HasPrefix(kv, "GIT_CONFIG_PARAMETERS=") || strings.HasPrefix(kv, "GIT_DIR=") {
			t.Errorf("the agent's %s reached git", kv)
		}
	}
	cfg := map[string]string{}
	for i := range len(gitGuards) + 1 {
		k, _ := chain.EnvValue(env, "GIT_CONFIG_KEY_"+strconv.Itoa(i))
		v, _ := chain.EnvValue(env, "GIT_CONFIG_VALUE_"+strconv.Itoa(i))
		cfg[k] = v
	}
	if n, _ := chain.EnvValue(env, "GIT_CONFIG_COUNT"); n != strconv.Itoa(len(gitGuards)+1) {
		t.Errorf("GIT_CONFIG_COUNT=%s", n)
	}
	cred := base64.StdEncoding.EncodeToString([]byte("x-access-token:baton-secret-git-token-00"))
	for k, v := range map[string]string{"core.hooksPath": "/dev/null", "protocol.allow": "never", "protocol.https.allow": "always",
		"transfer.fsckObjects": "true", "fetch.recurseSubmodules": "false", "credential.helper": "", "http.extraHeader": "Authorization: Basic " + cred} {
		if got, ok := cfg[k]; !ok || got != v {
			t.Errorf("config %s=%q, want %q", k, got, v)
		}
	}
	for _, step := range gitSteps(g) {
		if strings.Contains(strings.Join(step, " "), "baton-secret") || strings.Contains(strings.Join(step, " "), cred) {
			t.Errorf("argv %q holds the credential", step)
		}
	}
	g.Secret = ""
	if env := gitEnv(agent, g); slices.ContainsFunc(env, func(kv string) bool { return strings.Contains(kv, "extraHeader") }) {
		t.Error("a clone without a secret sends a credential")
	}
}

// TestGitSteps: the ref (HEAD by default) and depth are fetched, and the
// commit is checked out detached.
func TestGitSteps(t *testing.T) {
	got := gitSteps(&runspec.Git{URL: "https://h/r", Depth: 3})
	if f := strings.Join(got[2], " "); f != "fetch -q --no-tags --no-recurse-submodules --depth=3 origin HEAD" {
		t.Errorf("fetch: %s", f)
	}
	if c := strings.Join(got[3], " "); c != "checkout -q --detach FETCH_HEAD" {
		t.Errorf("checkout: %s", c)
	}
}

// TestGitSaid: a missing ref is said so, naming it.
func TestGitSaid(t *testing.T) {
	g := &runspec.Git{URL: "https://h/r", Ref: "nope", Depth: 1}
	out := []byte("remote: x\nfatal: couldn't find remote ref nope\n")
	if s := gitSaid(out, errors.New("exit status 128"), g); !strings.Contains(s, `ref "nope" does not exist`) {
		t.Errorf("gitSaid: %s", s)
	}
	out = []byte("error: index-pack died of signal 25\nfatal: fetch-pack: invalid index-pack output\n")
	if s := gitSaid(out, errors.New("exit status 128"), g); !strings.Contains(s, "limits.disk") || !strings.Contains(s, "invalid index-pack output") {
		t.Errorf("gitSaid of a full disk: %s", s)
	}
	if s := gitSaid(nil, errors.New("exit status 128"), g); s != "exit status 128" {
		t.Errorf("gitSaid without output: %s", s)
	}
}
