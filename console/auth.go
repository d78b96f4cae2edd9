package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The session cookie, named cookiePrefix and 12 hex digits of a digest of
// the token (auth.cookie), holds "v1.<expiry>.<id>.<mac>", a random id and
// its expiry (Unix seconds) signed with a key derived from the token. Not
// the token, so a leaked cookie jar hands out no token usable for
// `Authorization`; each login gets a session of its own, which ends at its
// expiry, at a logout, or when the token changes. A browser keeps cookies
// per host, not per port: a name of its own keeps a second console on the
// host (another token) from overwriting this one's session.
const cookiePrefix = "baton_console_"

// DefaultSessionTTL is how long a browser stays logged in.
const DefaultSessionTTL = 12 * time.Hour

// csrfHeader must be on every state-changing request that a cookie
// authenticates. A cross-site form cannot set a header, and a cross-site
// script that does triggers a CORS preflight the console never answers.
const csrfHeader = "X-Baton-Console"

// auth checks the token of every request but the login page's.
type auth struct {
	token   string        // empty: no auth (WithoutAuth)
	key     []byte        // signs sessions; derived from token
	cookie  string        // the session cookie's name; derived from token
	ttl     time.Duration // a session's life
	secure  bool          // mark the cookie Secure (served over TLS)
	base    string        // the path the console is mounted at, ending in "/"
	now     func() time.Time
	revoked *revocations // sessions logged out before their expiry
}

// revocations holds the ids of sessions logged out, each until its
// expiry: past it the cookie is refused anyway, so the set stays as small
// as the sessions live.
type revocations struct {
	mu sync.Mutex
	m  map[string]time.Time
}

func (r *revocations) add(id string, until, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, t := range r.m {
		if !t.After(now) {
			delete(r.m, k)
		}
	}
	r.m[id] = until
}

func (r *revocations) has(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.m[id]
	return ok
}

func newAuth(token string, secure bool, base string, ttl time.Duration) auth {
	if ttl <= 0 {
		ttl = DefaultSessionTTL
	}
	a := auth{base: base, ttl: ttl, secure: secure, now: time.Now, revoked: &revocations{m: map[string]time.Time{}}}
	if token == "" {
		return a
	}
	sum := sha256.Sum256([]byte("baton-console-session\x00" + token))
	name := sha256.Sum256([]byte("baton-console-cookie\x00" + token))
	a.token, a.key, a.cookie = token, sum[:], cookiePrefix+hex.EncodeToString(name[:6])
	return a
}

// newSession returns a fresh session's cookie value and its expiry.
func (a auth) newSession() (string, time.Time) {
	var id [16]byte
	_, _ = rand.Read(id[:]) // never fails (crypto/rand)
	exp := a.now().Add(a.ttl).Truncate(time.Second)
	body := "v1." + strconv.FormatInt(exp.Unix(), 10) + "." + hex.EncodeToString(id[:])
	return body + "." + a.mac(body), exp
}

func (a auth) mac(body string) string {
	m := hmac.New(sha256.New, a.key)
	m.Write([]byte(body))
	return hex.EncodeToString(m.Sum(nil))
}

// session checks a cookie value: signed by this token's key, not
// expired, not logged out. It returns the session's id and expiry.
func (a auth) session(v string) (id string, exp time.Time, ok bool) {
	i := strings.LastIndexByte(v, '.')
	if i < 0 || a.key == nil {
		return "", time.Time{}, false
	}
	body, mac := v[:i], v[i+1:]
	if !strings.HasPrefix(body, "v1.") || !hmac.Equal([]byte(mac), []byte(a.mac(body))) {
		return "", time.Time{}, false
	}
	expS, id, found := strings.Cut(body[len("v1."):], ".")
	sec, err := strconv.ParseInt(expS, 10, 64)
	if !found || err != nil {
		return "", time.Time{}, false
	}
	exp = time.Unix(sec, 0)
	if !exp.After(a.now()) || a.revoked.has(id) {
		return "", time.Time{}, false
	}
	return id, exp, true
}

func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// how a request proved it holds the token.
type proof int

const (
	proofNone proof = iota
	proofBearer
	proofCookie
	proofQuery
)

// check tells how r is authenticated, if at all.
func (a auth) check(r *http.Request) proof {
	if h := r.Header.Get("Authorization"); h != "" {
		tok, ok := strings.CutPrefix(h, "Bearer ")
		if ok && equal(tok, a.token) {
			return proofBearer
		}
		return proofNone // a wrong header is not rescued by a cookie
	}
	if r.Method == http.MethodGet {
		if tok := r.URL.Query().Get("token"); tok != "" {
			if equal(tok, a.token) {
				return proofQuery
			}
			return proofNone
		}
	}
	if c, err := r.Cookie(a.cookie); err == nil {
		if _, _, ok := a.session(c.Value); ok {
			return proofCookie
		}
	}
	return proofNone
}

// setCookie starts a new session for the browser.
func (a auth) setCookie(w http.ResponseWriter) {
	v, exp := a.newSession()
	http.SetCookie(w, &http.Cookie{
		Name: a.cookie, Value: v, Path: a.base, Expires: exp, MaxAge: int(a.ttl / time.Second),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: a.secure,
	})
}

// logout ends the request's session, if it has one, and clears the
// cookie: the session's id is refused until its expiry, whoever kept a
// copy of the cookie.
func (a auth) logout(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(a.cookie); err == nil {
		if id, exp, ok := a.session(c.Value); ok {
			a.revoked.add(id, exp, a.now())
		}
	}
	http.SetCookie(w, &http.Cookie{Name: a.cookie, Value: "", Path: a.base, MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: a.secure})
	http.Redirect(w, r, a.base+"login", http.StatusSeeOther)
}

// wrap requires the token on every request to next, except the login
// page and its assets.
func (a auth) wrap(next http.Handler) http.Handler {
	if a.token == "" {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/login" || r.URL.Path == "/assets/app.css" {
			a.login(w, r)
			return
		}
		switch a.check(r) {
		case proofQuery:
			// Once: the cookie takes over and the token leaves the
			// address bar (and the browser's history).
			a.setCookie(w)
			q := r.URL.Query()
			q.Del("token")
			// Never "//host": a path-relative redirect stays on the console.
			u := url.URL{Path: a.base + strings.TrimLeft(r.URL.Path, "/"), RawQuery: q.Encode()}
			http.Redirect(w, r, u.String(), http.StatusSeeOther)
		case proofBearer:
			next.ServeHTTP(w, r)
		case proofCookie:
			if !safeMethod(r.Method) && !sameOrigin(r) {
				http.Error(w, "cross-site request refused: send the "+csrfHeader+" header from the console's own origin", http.StatusForbidden)
				return
			}
			if r.URL.Path == "/logout" && r.Method == http.MethodPost {
				a.logout(w, r)
				return
			}
			next.ServeHTTP(w, r)
		default:
			if strings.HasPrefix(r.URL.Path, "/api/") || !safeMethod(r.Method) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="baton console"`)
				http.Error(w, "unauthorized: give the console's token (Authorization: Bearer, or log in)", http.StatusUnauthorized)
				return
			}
			http.Redirect(w, r, a.base+"login", http.StatusSeeOther)
		}
	})
}

func safeMethod(m string) bool { return m == http.MethodGet || m == http.MethodHead }

// sameOrigin is the CSRF check of a cookie-authenticated state change: the
// console's header must be present, and an Origin, when the browser sends
// one, must be the console's own.
func sameOrigin(r *http.Request) bool {
	if r.Header.Get(csrfHeader) == "" {
		return false
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host
}

// login serves the login form and takes its token.
func (a auth) login(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/assets/app.css" {
		serveAsset(w, r, "assets/app.css")
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		serveAsset(w, r, "assets/login.html")
	case http.MethodPost:
		// A login form posted from another site could only log the
		// browser in with a token that site knows; refuse it anyway.
		if o := r.Header.Get("Origin"); o != "" {
			if u, err := url.Parse(o); err != nil || u.Host != r.Host {
				http.Error(w, "cross-site login refused", http.StatusForbidden)
				return
			}
		}
		if err := r.ParseForm(); err != nil || !equal(r.PostForm.Get("token"), a.token) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write(loginFailed)
			return
		}
		a.setCookie(w)
		http.Redirect(w, r, a.base, http.StatusSeeOther)
	default:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

var loginFailed = []byte(`<!doctype html><meta charset="utf-8"><title>baton console</title>
<link rel="stylesheet" href="assets/app.css"><main class="login"><h1>baton console</h1>
<p class="error">Wrong token.</p><p><a href="login">Try again</a></p></main>`)
