package console

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzAuthCheck: whatever a request carries, it is authenticated only by
// the exact token (header or query) or the exact session cookie.
func FuzzAuthCheck(f *testing.F) {
	a := newAuth("the-token", false, "/", 0)
	session, _ := a.newSession()
	f.Add("Bearer the-token", "", "")
	f.Add("", "the-token", "")
	f.Add("", "", session)
	f.Add("Bearer the-token ", "the-token\x00", session+"x")
	f.Add("bearer the-token", "", "")
	f.Fuzz(func(t *testing.T, header, query, cookie string) {
		r := &http.Request{Method: http.MethodGet, Header: http.Header{}, URL: &url.URL{Path: "/api/runs"}}
		if header != "" {
			r.Header.Set("Authorization", header)
		}
		if query != "" {
			r.URL.RawQuery = url.Values{"token": {query}}.Encode()
		}
		if cookie != "" {
			r.AddCookie(&http.Cookie{Name: a.cookie, Value: cookie})
		}
		got := a.check(r)
		var ok bool
		switch got {
		case proofBearer:
			ok = header == "Bearer the-token"
		case proofQuery:
			ok = header == "" && query == "the-token"
		case proofCookie:
			// The only session the fuzzer can know is the one issued: a
			// cookie it made up must never pass.
			ok = header == "" && query == "" && cookieValue(r, a.cookie) == session
		case proofNone:
			ok = true
		}
		if !ok {
			t.Fatalf("header %q query %q cookie %q: authenticated as %d", header, query, cookie, got)
		}
	})
}

func cookieValue(r *http.Request, name string) string {
	c, err := r.Cookie(name)
	if err != nil {
		return ""
	}
	return c.Value
}

// TestSessions: a session cookie is good until its expiry, its logout or a
// change of token, and only as issued.
func TestSessions(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	a := newAuth("the-token", false, "/", time.Hour)
	a.now = func() time.Time { return now }
	v, exp := a.newSession()
	if !exp.Equal(now.Add(time.Hour)) {
		t.Fatalf("expiry %v, want %v", exp, now.Add(time.Hour))
	}
	parts := strings.Split(v, ".")
	if len(parts) != 4 || parts[0] != "v1" {
		t.Fatalf("cookie %q is not v1.<expiry>.<id>.<mac>", v)
	}
	other := newAuth("another-token", false, "/", time.Hour)
	other.now = a.now
	later := strconv.FormatInt(now.Add(100*time.Hour).Unix(), 10)
	for _, tc := range []struct {
		name  string
		a     auth
		value string
		at    time.Time
		want  bool
	}{
		{"as issued", a, v, now, true},
		{"just before its expiry", a, v, exp.Add(-time.Second), true},
		{"at its expiry", a, v, exp, false},
		{"after its expiry", a, v, exp.Add(time.Minute), false},
		{"another token's console", other, v, now, false},
		{"expiry pushed back", a, strings.Join([]string{parts[0], later, parts[2], parts[3]}, "."), now, false},
		{"another id", a, strings.Join([]string{parts[0], parts[1], strings.Repeat("0", 32), parts[3]}, "."), now, false},
		{"another version", a, "v2" + v[2:], now, false},
		{"mac cut", a, v[:len(v)-1], now, false},
		{"empty", a, "", now, false},
		{"no dots", a, "v1", now, false},
		{"the old fixed digest", a, "0000000000000000000000000000000000000000000000000000000000000000", now, false},
	} {
		tc.a.now = func() time.Time { return tc.at }
		if _, _, ok := tc.a.session(tc.value); ok != tc.want {
			t.Errorf("%s: session ok = %v, want %v", tc.name, ok, tc.want)
		}
	}
	if v2, _ := a.newSession(); v2 == v {
		t.Error("two logins got the same session")
	}
}

// TestLogout: POST logout from the console's page ends the session for
// every copy of its cookie; from another site it is refused.
func TestLogout(t *testing.T) {
	a := newAuth("the-token", false, "/", 0)
	h := a.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }))
	login := httptest.NewRecorder()
	h.ServeHTTP(login, httptest.NewRequest("GET", "/?token=the-token", nil))
	cookies := login.Result().Cookies()
	if len(cookies) != 1 || cookies[0].MaxAge <= 0 || cookies[0].Expires.IsZero() {
		t.Fatalf("login cookies %+v, want one that expires", cookies)
	}
	c := cookies[0]
	do := func(method, path string, hdr map[string]string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, path, nil)
		r.AddCookie(c)
		for k, v := range hdr {
			r.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	if got := do("GET", "/api/runs", nil).Code; got != http.StatusOK {
		t.Fatalf("with the session: %d", got)
	}
	if got := do("POST", "/logout", nil).Code; got != http.StatusForbidden {
		t.Fatalf("logout without the console's header: %d, want 403", got)
	}
	out := do("POST", "/logout", map[string]string{csrfHeader: "1"})
	if out.Code != http.StatusSeeOther {
		t.Fatalf("logout: %d, want 303", out.Code)
	}
	if cleared := out.Result().Cookies(); len(cleared) != 1 || cleared[0].MaxAge >= 0 {
		t.Fatalf("logout cookies %+v, want the session's cleared", cleared)
	}
	if got := do("GET", "/api/runs", nil).Code; got != http.StatusUnauthorized {
		t.Fatalf("the logged-out cookie again: %d, want 401", got)
	}
}
