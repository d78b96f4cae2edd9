package console

import (
	"net/http"
	"net/url"
	"testing"
)

// FuzzAuthCheck: whatever a request carries, it is authenticated only by
// the exact token (header or query) or the exact session cookie.
func FuzzAuthCheck(f *testing.F) {
	a := newAuth("the-token", false, "/")
	f.Add("Bearer the-token", "", "")
	f.Add("", "the-token", "")
	f.Add("", "", a.session)
	f.Add("Bearer the-token ", "the-token\x00", a.session+"x")
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
			r.AddCookie(&http.Cookie{Name: cookieName, Value: cookie})
		}
		got := a.check(r)
		var ok bool
		switch got {
		case proofBearer:
			ok = header == "Bearer the-token"
		case proofQuery:
			ok = header == "" && query == "the-token"
		case proofCookie:
			ok = header == "" && query == "" && r.Header.Get("Cookie") != "" && cookieValue(r) == a.session
		case proofNone:
			ok = true
		}
		if !ok {
			t.Fatalf("header %q query %q cookie %q: authenticated as %d", header, query, cookie, got)
		}
	})
}

func cookieValue(r *http.Request) string {
	c, err := r.Cookie(cookieName)
	if err != nil {
		return ""
	}
	return c.Value
}
