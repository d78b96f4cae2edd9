package testenv_test

import (
	"io"
	"net/http"
	"testing"

	"github.com/batonhq/baton/internal/testenv"
)

func TestTestHost(t *testing.T) {
	h := testenv.NewTestHost(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello from the test host")
	}))
	if !h.Prefix.Contains(h.Addr) || !h.Prefix.Contains(h.HostSide) || h.Addr == h.HostSide || h.Prefix.Bits() != 30 {
		t.Fatalf("addresses %+v", h)
	}
	resp, err := http.Get(h.URL("/"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if string(b) != "hello from the test host" {
		t.Fatalf("body %q", b)
	}
}
