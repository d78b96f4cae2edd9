package console

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"net/url"
	"strings"
)

// cookieName holds the session: a digest of the token, not the token, so a
// leaked cookie jar does not hand out a token usable for `Authorization`.
const cookieName = "baton_console"

// csrfHeader must be on every state-changing request that a cookie
// authenticates. A cross-site form cannot set a header, and a cross-site
// script that does triggers a CORS preflight the console never answers.
const csrfHeader = "X-Baton-Console"

// auth checks the token of every request but the login page's.
type auth struct {
	token   string // empty: no auth (WithoutAuth)
	session string // the cookie's value for token
	secure  bool   // mark the cookie Secure (served over TLS)
	base    string // the path the console is mounted at, ending in "/"
}

func newAuth(token string, secure bool, base string) auth {
	if token == "" {
		return auth{base: base}
	}
	sum := sha256.Sum256([]byte("baton-console-session\x00" + token))
	return auth{token: token, session: hex.EncodeToString(sum[:]), secure: secure, base: base}
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
	if c, err := r.Cookie(cookieName); err == nil && equal(c.Value, a.session) {
		return proofCookie
	}
	return proofNone
}

func (a auth) setCookie(w http.ResponseWriter) {
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: a.session, Path: a.base,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: a.secure,
	})
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
