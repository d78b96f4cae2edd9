package runtoken

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"

	"github.com/batonhq/baton/protocol"
)

var names = protocol.MustNames("")

func issuer(t testing.TB) *Issuer {
	t.Helper()
	seed, _, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	i, err := NewIssuer(seed, names)
	if err != nil {
		t.Fatal(err)
	}
	return i
}

func TestNewIssuerNeedsAnAccountSeed(t *testing.T) {
	user, _ := nkeys.CreateUser()
	useed, _ := user.Seed()
	for _, seed := range [][]byte{nil, []byte("garbage"), useed} {
		if _, err := NewIssuer(seed, names); !errors.Is(err, ErrBadKey) {
			t.Errorf("NewIssuer(%.6q): %v, want ErrBadKey", seed, err)
		}
	}
}

func TestIssue(t *testing.T) {
	i := issuer(t)
	for _, tc := range []struct {
		run string
		ttl time.Duration
		ok  bool
	}{
		{"run-1", time.Minute, true},
		{"run-1", MaxTTL, true},
		{"run-1", MaxTTL + time.Second, false},
		{"run-1", 0, false},
		{"a.b", time.Minute, false},
		{"", time.Minute, false},
		{"run-*", time.Minute, false},
	} {
		tok, err := i.Issue(tc.run, tc.ttl, false)
		if (err == nil) != tc.ok {
			t.Errorf("Issue(%q, %v): %v", tc.run, tc.ttl, err)
			continue
		}
		if err != nil {
			continue
		}
		uc, err := jwt.DecodeUserClaims(tok)
		if err != nil {
			t.Fatal(err)
		}
		if uc.Issuer != i.PublicKey() || uc.Name != tc.run || !uc.BearerToken ||
			!slices.Equal(uc.AllowedConnectionTypes, jwt.StringList{jwt.ConnectionTypeWebsocket}) {
			t.Errorf("claims %+v", uc)
		}
		if d := time.Until(time.Unix(uc.Expires, 0)); d > tc.ttl || d < tc.ttl-time.Minute {
			t.Errorf("expires in %v, want %v", d, tc.ttl)
		}
	}
}

func TestPermissions(t *testing.T) {
	p := Permissions(names, "run-1", false)
	// The read relay only: no JetStream API subject at all (F8).
	wantPub := []string{"baton.read.events.run-1"}
	if !slices.Equal(p.Pub.Allow, wantPub) || !slices.Equal(p.Sub.Allow, []string{"baton.runs.run-1.>", "_INBOX_run.run-1.>"}) {
		t.Fatalf("permissions %+v", p)
	}
	if pi := Permissions(names, "run-1", true); !slices.Equal(pi.Pub.Allow, append(wantPub, "baton.input.run-1")) {
		t.Fatalf("input permissions %+v", pi.Pub.Allow)
	}
}

func TestVerify(t *testing.T) {
	i := issuer(t)
	good, _ := i.Issue("run-1", time.Minute, false)
	other := issuer(t)
	forged, _ := other.Issue("run-1", time.Minute, false)
	// A user JWT of the right key without a run or an expiry.
	kp := i.kp
	noRun := jwt.NewUserClaims("UAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
	noRun.Expires = time.Now().Add(time.Minute).Unix()
	noRunTok, _ := noRun.Encode(kp)
	user, _ := nkeys.CreateUser()
	upub, _ := user.PublicKey()
	noExp := jwt.NewUserClaims(upub)
	noExp.Name = "run-1"
	noExpTok, _ := noExp.Encode(kp)
	parts := strings.Split(good, ".")
	tampered := parts[0] + "." + parts[1] + "x." + parts[2]
	// Signed with our key, but with other permissions than Permissions
	// gives the run: an older version's inbox (_INBOX_<runId>, which for
	// run baton_worker is the workers' inbox, F1), one more subject, one
	// fewer, allowed responses.
	minted := func(run string, edit func(*jwt.Permissions)) string {
		u, _ := nkeys.CreateUser()
		pub, _ := u.PublicKey()
		uc := jwt.NewUserClaims(pub)
		uc.Name = run
		uc.Expires = time.Now().Add(time.Minute).Unix()
		uc.Permissions = Permissions(names, run, false)
		edit(&uc.Permissions)
		tok, err := uc.Encode(kp)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	oldInbox := minted("baton_worker", func(p *jwt.Permissions) {
		p.Sub.Allow = jwt.StringList{names.RunFilter("baton_worker"), "_INBOX_baton_worker.>"}
	})
	wider := minted("run-1", func(p *jwt.Permissions) { p.Pub.Allow.Add("$JS.API.>") })
	narrower := minted("run-1", func(p *jwt.Permissions) { p.Sub.Allow = p.Sub.Allow[:1] })
	responses := minted("run-1", func(p *jwt.Permissions) { p.Resp = &jwt.ResponsePermission{MaxMsgs: 1} })
	reordered := minted("run-1", func(p *jwt.Permissions) { slices.Reverse(p.Pub.Allow) })

	for _, tc := range []struct {
		name, tok string
		ok        bool
	}{
		{"good", good, true},
		{"other key", forged, false},
		{"no run", noRunTok, false},
		{"no expiry", noExpTok, false},
		{"tampered", tampered, false},
		{"empty", "", false},
		{"garbage", "a.b.c", false},
		{"older inbox", oldInbox, false},
		{"wider", wider, false},
		{"narrower", narrower, false},
		{"responses", responses, false},
		{"same permissions, other order", reordered, true},
	} {
		_, err := i.verify(tc.tok)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrBadToken)) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	// Expired: the issuer's clock moves past the expiry.
	i.now = func() time.Time { return time.Now().Add(2 * time.Minute) }
	if _, err := i.verify(good); !errors.Is(err, ErrBadToken) || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("expired token: %v", err)
	}
}

// request builds a callout request as nats-server sends it.
func request(t testing.TB, token string) (req []byte, userPub string) {
	t.Helper()
	srv, _ := nkeys.CreateServer()
	spub, _ := srv.PublicKey()
	user, _ := nkeys.CreateUser()
	userPub, _ = user.PublicKey()
	rc := jwt.NewAuthorizationRequestClaims(spub)
	rc.Server = jwt.ServerID{Name: "s", ID: "SERVERID"}
	rc.UserNkey = userPub
	rc.ConnectOptions.Token = token
	s, err := rc.Encode(srv)
	if err != nil {
		t.Fatal(err)
	}
	return []byte(s), userPub
}

func TestAnswer(t *testing.T) {
	i := issuer(t)
	tok, _ := i.Issue("run-1", time.Minute, true)
	req, userPub := request(t, tok)
	b, err := i.answer(req)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := jwt.DecodeAuthorizationResponseClaims(string(b))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Error != "" || resp.Audience != "SERVERID" || resp.Subject != userPub || resp.Issuer != i.PublicKey() {
		t.Fatalf("response %+v", resp)
	}
	uc, err := jwt.DecodeUserClaims(resp.Jwt)
	if err != nil {
		t.Fatal(err)
	}
	if uc.Subject != userPub || uc.Audience != "$G" || uc.Name != "run-1" ||
		!slices.Equal(uc.Pub.Allow, Permissions(names, "run-1", true).Pub.Allow) ||
		!slices.Equal(uc.AllowedConnectionTypes, jwt.StringList{jwt.ConnectionTypeWebsocket}) || uc.Expires == 0 {
		t.Fatalf("granted %+v", uc)
	}

	for _, bad := range []string{"", "garbage", tok[:len(tok)-4]} {
		req, _ := request(t, bad)
		b, err := i.answer(req)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := jwt.DecodeAuthorizationResponseClaims(string(b))
		if err != nil || resp.Error == "" || resp.Jwt != "" {
			t.Fatalf("token %q: %+v %v", bad, resp, err)
		}
	}
	if _, err := i.answer([]byte("not a jwt")); err == nil {
		t.Fatal("an unreadable request was answered")
	}
}

func FuzzAnswer(f *testing.F) {
	i := issuer(f)
	tok, _ := i.Issue("run-1", time.Minute, false)
	good, _ := request(f, tok)
	f.Add(good)
	f.Add([]byte(tok))
	f.Add([]byte("a.b.c"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := i.answer(b)
		if err != nil {
			return
		}
		resp, err := jwt.DecodeAuthorizationResponseClaims(string(out))
		if err != nil {
			t.Fatalf("our own answer does not decode: %v", err)
		}
		if resp.Jwt != "" {
			uc, err := jwt.DecodeUserClaims(resp.Jwt)
			if err != nil || uc.Issuer != i.PublicKey() || !protocol.ValidRunID(uc.Name) {
				t.Fatalf("granted %+v %v", uc, err)
			}
		}
	})
}

// TestPermissionsReachNoOtherIdentity goes over the run-id grammar's edge
// cases: no token's subscriptions cover another identity's inbox (the
// clients' _INBOX, the workers' _INBOX_baton_worker, another run's
// _INBOX_run.<id>) or any subject outside its own run; and the callout
// refuses a token for run baton_worker that may read the workers' inbox.
func TestPermissionsReachNoOtherIdentity(t *testing.T) {
	ids := []string{"baton_worker", "worker", "console", "client", "_INBOX", "INBOX_run", "_", "-", "run", "run-1",
		"run-10", "run-1-", "a", "a_", strings.Repeat("z", 128), strings.Repeat("_", 128), strings.Repeat("-", 128)}
	for _, id := range ids {
		if !protocol.ValidRunID(id) {
			t.Fatalf("%q is not a valid run id; the table is wrong", id)
		}
	}
	if protocol.ValidRunID(strings.Repeat("z", 129)) {
		t.Fatal("129 bytes is a valid run id; the table's maximum is wrong")
	}
	for _, id := range ids {
		foreign := []string{
			protocol.ClientInboxPrefix + ".>", protocol.WorkerInboxPrefix + ".>", protocol.ClientInboxPrefix + ".x",
			protocol.WorkerInboxPrefix + ".x", "$JS.API.>", "$JS.ACK.>", "$KV.>", "$O.>", "$SRV.>", "$SYS.>",
			names.Prefix() + ".ingest.>", names.Prefix() + ".jobs.>", names.Prefix() + ".control.>",
			names.Prefix() + ".input.>", names.Prefix() + ".inputs.>", names.Prefix() + ".worker.>", names.Prefix() + ".dlq.>",
		}
		for _, other := range ids {
			if other != id {
				foreign = append(foreign, protocol.RunInboxPrefix(other)+".>", names.RunFilter(other))
			}
		}
		for _, input := range []bool{false, true} {
			p := Permissions(names, id, input)
			own := []string{names.RunFilter(id), protocol.RunInboxPrefix(id) + ".>"}
			if !slices.Equal(slices.Sorted(slices.Values(p.Sub.Allow)), slices.Sorted(slices.Values(own))) || len(p.Sub.Deny) != 0 {
				t.Errorf("run %q may subscribe %v, want %v", id, p.Sub.Allow, own)
			}
			for _, sub := range p.Sub.Allow {
				for _, f := range foreign {
					if server.SubjectsCollide(sub, f) {
						t.Errorf("run %q's token may subscribe %q, which reaches %q", id, sub, f)
					}
				}
			}
		}
	}

	i := issuer(t)
	u, _ := nkeys.CreateUser()
	upub, _ := u.PublicKey()
	uc := jwt.NewUserClaims(upub)
	uc.Name = "baton_worker"
	uc.Expires = time.Now().Add(time.Minute).Unix()
	uc.Permissions = Permissions(names, "baton_worker", false)
	uc.Sub.Allow.Add(protocol.WorkerInboxPrefix + ".>")
	tok, err := uc.Encode(i.kp)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := request(t, tok)
	b, err := i.answer(req)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := jwt.DecodeAuthorizationResponseClaims(string(b))
	if err != nil || resp.Error == "" || resp.Jwt != "" {
		t.Fatalf("a token reading the workers' inbox: %+v %v; want refused", resp, err)
	}
}
