package runtoken

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/batonhq/baton/protocol"
)

var (
	// ErrBadToken means a presented token is not one this issuer signed for
	// a run, or it has expired.
	ErrBadToken = errors.New("runtoken: not a valid run token")
	// ErrBadKey means the signing key is not an account nkey seed.
	ErrBadKey = errors.New("runtoken: signing key must be an account nkey seed (SA…)")
)

// AuthSubject is where nats-server sends auth callout requests.
const AuthSubject = "$SYS.REQ.USER.AUTH"

// MaxTTL bounds a token's life.
const MaxTTL = 24 * time.Hour

// InboxPrefix is the inbox prefix a client of runID's token must use
// (nats.CustomInboxPrefix, or inboxPrefix in nats.js): its replies from
// JetStream come there, and it may subscribe nowhere else but the run's
// subjects.
// It is protocol.RunInboxPrefix: a namespace of its own per run, which no
// other identity's inbox can share.
func InboxPrefix(runID string) string { return protocol.RunInboxPrefix(runID) }

// Permissions returns what a token for runID allows, and nothing more:
//   - subscribe to the run's subjects (a live view) and to its inbox;
//   - ask the workers' read relay for pages of the run's chain
//     (<prefix>.read.events.<runId>): no consumer create and no direct
//     get, so no body of the token's reaches the JetStream API, and it can
//     make no consumer that outlives it (F8);
//   - with input, publish the run's input.
func Permissions(names protocol.Names, runID string, input bool) jwt.Permissions {
	var p jwt.Permissions
	p.Pub.Allow.Add(names.ReadEventsSubject(runID))
	if input {
		p.Pub.Allow.Add(names.InputSubject(runID))
	}
	p.Sub.Allow.Add(names.RunFilter(runID), InboxPrefix(runID)+".>")
	return p
}

// Issuer signs run tokens and answers auth callouts with one account key.
type Issuer struct {
	kp      nkeys.KeyPair
	pub     string
	names   protocol.Names
	account string
	now     func() time.Time
}

// Option configures an Issuer.
type Option func(*Issuer)

// WithAccount names the account the server places token users in (the
// callout's audience); default "$G", the global account of a server
// configured without accounts.
func WithAccount(name string) Option { return func(i *Issuer) { i.account = name } }

// NewIssuer returns an issuer signing with seed, an account nkey seed.
func NewIssuer(seed []byte, names protocol.Names, opts ...Option) (*Issuer, error) {
	kp, err := nkeys.FromSeed(seed)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadKey, err)
	}
	pub, err := kp.PublicKey()
	if err != nil || !nkeys.IsValidPublicAccountKey(pub) {
		return nil, ErrBadKey
	}
	i := &Issuer{kp: kp, pub: pub, names: names, account: "$G", now: time.Now}
	for _, o := range opts {
		o(i)
	}
	return i, nil
}

// LoadIssuer reads the seed from file (as `nsc` or `baton token --new-key`
// writes it: the seed alone, or a creds-like file holding it).
func LoadIssuer(file string, names protocol.Names, opts ...Option) (*Issuer, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("runtoken: signing key: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); strings.HasPrefix(line, "SA") {
			return NewIssuer([]byte(line), names, opts...)
		}
	}
	return nil, fmt.Errorf("%w: no seed in %s", ErrBadKey, file)
}

// PublicKey is the account public key: the auth callout's issuer in the
// server's configuration.
func (i *Issuer) PublicKey() string { return i.pub }

// Issue returns a token for runID valid for ttl.
func (i *Issuer) Issue(runID string, ttl time.Duration, input bool) (string, error) {
	if !protocol.ValidRunID(runID) {
		return "", fmt.Errorf("%w: %q", protocol.ErrBadRunID, runID)
	}
	if ttl <= 0 || ttl > MaxTTL {
		return "", fmt.Errorf("runtoken: ttl %v must be above 0 and at most %v", ttl, MaxTTL)
	}
	user, err := nkeys.CreateUser()
	if err != nil {
		return "", err
	}
	upub, err := user.PublicKey()
	if err != nil {
		return "", err
	}
	uc := jwt.NewUserClaims(upub)
	uc.Name = runID
	uc.Expires = i.now().Add(ttl).Unix()
	uc.Permissions = Permissions(i.names, runID, input)
	uc.AllowedConnectionTypes.Add(jwt.ConnectionTypeWebsocket)
	uc.BearerToken = true
	return uc.Encode(i.kp)
}

// verify checks a presented token: signed by this issuer, not expired,
// naming a valid run, with exactly the permissions Permissions gives that
// run; it returns the claims to grant.
func (i *Issuer) verify(tok string) (*jwt.UserClaims, error) {
	uc, err := jwt.DecodeUserClaims(tok)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadToken, err)
	}
	if uc.Issuer != i.pub {
		return nil, fmt.Errorf("%w: signed by another key", ErrBadToken)
	}
	if uc.Expires == 0 || i.now().Unix() >= uc.Expires {
		return nil, fmt.Errorf("%w: expired", ErrBadToken)
	}
	if !protocol.ValidRunID(uc.Name) {
		return nil, fmt.Errorf("%w: no run", ErrBadToken)
	}
	// A token carrying other permissions than this version derives for
	// its run (minted by an older version, e.g. with the inbox
	// _INBOX_<runId> that run "baton_worker" shared with the workers, F1)
	// is refused rather than trusted for what it names.
	input := uc.Pub.Allow.Contains(i.names.InputSubject(uc.Name))
	if !samePermissions(uc.Permissions, Permissions(i.names, uc.Name, input)) {
		return nil, fmt.Errorf("%w: its permissions are not those of run %s's token", ErrBadToken, uc.Name)
	}
	return uc, nil
}

// samePermissions reports whether a and b allow and deny the same
// subjects, in any order, and neither allows responses.
func samePermissions(a, b jwt.Permissions) bool {
	same := func(x, y jwt.StringList) bool {
		return slices.Equal(slices.Sorted(slices.Values(x)), slices.Sorted(slices.Values(y)))
	}
	return same(a.Pub.Allow, b.Pub.Allow) && same(a.Pub.Deny, b.Pub.Deny) &&
		same(a.Sub.Allow, b.Sub.Allow) && same(a.Sub.Deny, b.Sub.Deny) && a.Resp == nil && b.Resp == nil
}

// Serve answers the server's auth callout requests on nc until ctx ends:
// a connection presenting a valid run token (as its token or JWT) gets a
// user JWT for its own nkey with the token's permissions, WebSocket only,
// expiring with the token; anything else is refused. nc must be one of the
// callout's auth_users.
func (i *Issuer) Serve(ctx context.Context, nc *nats.Conn) error {
	sub, err := nc.Subscribe(AuthSubject, func(m *nats.Msg) {
		if resp, err := i.answer(m.Data); err == nil {
			_ = m.Respond(resp)
		}
	})
	if err != nil {
		return err
	}
	if err := nc.Flush(); err != nil {
		_ = sub.Unsubscribe()
		return err
	}
	context.AfterFunc(ctx, func() { _ = sub.Unsubscribe() })
	return nil
}

// answer builds the signed response to one callout request. Only a request
// that cannot be read gets no answer (the server then times out).
func (i *Issuer) answer(req []byte) ([]byte, error) {
	rc, err := jwt.DecodeAuthorizationRequestClaims(string(req))
	if err != nil {
		return nil, err
	}
	resp := jwt.NewAuthorizationResponseClaims(rc.UserNkey)
	resp.Audience = rc.Server.ID
	tok := rc.ConnectOptions.Token
	if tok == "" {
		tok = rc.ConnectOptions.JWT
	}
	if uc, err := i.verify(tok); err != nil {
		resp.Error = err.Error()
	} else {
		out := jwt.NewUserClaims(rc.UserNkey)
		out.Name = uc.Name
		out.Audience = i.account
		out.Expires = uc.Expires
		// Re-derived, not copied: a token grants what this version
		// grants for its run, never more.
		out.Permissions = Permissions(i.names, uc.Name, uc.Pub.Allow.Contains(i.names.InputSubject(uc.Name)))
		out.AllowedConnectionTypes.Add(jwt.ConnectionTypeWebsocket)
		if resp.Jwt, err = out.Encode(i.kp); err != nil {
			resp.Jwt, resp.Error = "", err.Error()
		}
	}
	s, err := resp.Encode(i.kp)
	if err != nil {
		return nil, err
	}
	return []byte(s), nil
}

// NewKey returns a new account key's seed and public key.
func NewKey() (seed []byte, pub string, err error) {
	kp, err := nkeys.CreateAccount()
	if err != nil {
		return nil, "", err
	}
	if seed, err = kp.Seed(); err != nil {
		return nil, "", err
	}
	pub, err = kp.PublicKey()
	return seed, pub, err
}
