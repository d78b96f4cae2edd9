package egress

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/batonhq/baton/sandbox/runspec"
)

// testPolicy allows api.example.com (resolving to the addresses in dns),
// names under .example.org, the CIDR 10.213.7.0/30, and pins
// test.internal to 10.213.7.2. The host's addresses are 192.0.2.2 and
// 10.213.7.1.
func testPolicy(t *testing.T, dns map[string][]string) (*Policy, *[]string) {
	t.Helper()
	var lookups []string
	p, err := NewPolicy(runspec.Network{
		Allow: []string{"api.example.com", ".example.org", "test.internal", "10.213.7.0/30", "fd00:7::/64"},
		Hosts: map[string]string{"test.internal": "10.213.7.2"},
	},
		WithResolver(func(_ context.Context, host string) ([]netip.Addr, error) {
			lookups = append(lookups, host)
			var out []netip.Addr
			for _, s := range dns[host] {
				out = append(out, netip.MustParseAddr(s))
			}
			if out == nil {
				return nil, errors.New("no such host")
			}
			return out, nil
		}),
		WithLocalAddrs(func() ([]netip.Addr, error) {
			return []netip.Addr{netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("10.213.7.1")}, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	return p, &lookups
}

func TestCheckAddr(t *testing.T) {
	p, _ := testPolicy(t, nil)
	for addr, why := range map[string]string{
		"93.184.216.34":      "",
		"2606:2800:220:1::1": "",
		"10.213.7.2":         "", // listed
		"10.213.7.3":         "", // listed
		"fd00:7::5":          "", // listed
		"::ffff:10.213.7.2":  "", // listed, mapped
		"10.213.7.1":         "address of the host",
		"192.0.2.2":          "address of the host",
		"::ffff:192.0.2.2":   "address of the host",
		"127.0.0.1":          "loopback",
		"127.5.5.5":          "loopback",
		"::1":                "loopback",
		"::ffff:127.0.0.1":   "loopback",
		"0.0.0.0":            "unspecified",
		"::":                 "unspecified",
		"224.0.0.1":          "multicast",
		"ff02::1":            "multicast",
		"255.255.255.255":    "loopback, unspecified or multicast",
		"10.0.0.1":           "private",
		"172.16.5.4":         "private",
		"192.168.1.1":        "private",
		"fd12::1":            "private",
		"169.254.169.254":    "link-local",
		"fe80::1":            "link-local",
		"100.64.0.1":         "not public",
		"198.18.0.1":         "not public",
		"240.0.0.1":          "not public",
		"2002:a00:1::1":      "not public",
		"2001:db8::1":        "not public",
		"0.1.2.3":            "never reachable",
		"0.255.255.255":      "never reachable",
		"::ffff:0.1.2.3":     "never reachable",
		"::a00:1":            "never reachable", // IPv4-compatible 10.0.0.1
		"::5db8:d822":        "never reachable", // IPv4-compatible public
		"::7f00:1":           "never reachable", // IPv4-compatible loopback
		"64:ff9b::7f00:1":    "NAT64 for a refused address",
		"64:ff9b::a00:1":     "NAT64 for a refused address",
		"64:ff9b::c000:202":  "NAT64 for a refused address", // the host's own
		"64:ff9b::5db8:d822": "not public",                  // NAT64 of a public one: refused unless listed
	} {
		err := p.CheckAddr(netip.MustParseAddr(addr))
		switch {
		case why == "" && err != nil:
			t.Errorf("CheckAddr(%s) = %v, want allowed", addr, err)
		case why != "" && (!errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), why)):
			t.Errorf("CheckAddr(%s) = %v, want refused: %s", addr, err, why)
		}
	}
}

func TestLookup(t *testing.T) {
	dns := map[string][]string{
		"api.example.com":    {"93.184.216.34", "10.0.0.7", "127.0.0.1", "2606:2800:220:1::1", "93.184.216.34"},
		"a.example.org":      {"169.254.169.254"},
		"evil.example.net":   {"93.184.216.35"},
		"rebind.example.org": {"192.0.2.2"},
	}
	p, lookups := testPolicy(t, dns)
	ctx := context.Background()
	got, err := p.Lookup(ctx, "API.example.com.")
	if err != nil || !slices.Equal(got, []netip.Addr{netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("2606:2800:220:1::1")}) {
		t.Errorf("Lookup(api) = %v, %v: want the public addresses, once each", got, err)
	}
	if got, err := p.Lookup(ctx, "test.internal"); err != nil || !slices.Equal(got, []netip.Addr{netip.MustParseAddr("10.213.7.2")}) {
		t.Errorf("Lookup(pinned) = %v, %v", got, err)
	}
	for name, want := range map[string]error{
		"evil.example.net":   ErrNotAllowed,
		"example.org":        ErrNotAllowed,
		"a.example.org":      ErrRefused,
		"rebind.example.org": ErrRefused,
	} {
		if _, err := p.Lookup(ctx, name); !errors.Is(err, want) {
			t.Errorf("Lookup(%s) = %v, want %v", name, err, want)
		}
	}
	if _, err := p.Lookup(ctx, "missing.example.org"); err == nil || errors.Is(err, ErrNotAllowed) {
		t.Errorf("Lookup of an allowed name the resolver does not know = %v", err)
	}
	// Names off the list never reach the resolver; pinned ones neither.
	if slices.Contains(*lookups, "evil.example.net") || slices.Contains(*lookups, "example.org") || slices.Contains(*lookups, "test.internal") {
		t.Errorf("resolver saw %q", *lookups)
	}
}

func TestTargets(t *testing.T) {
	p, _ := testPolicy(t, map[string][]string{"api.example.com": {"93.184.216.34"}})
	ctx := context.Background()
	for host, ok := range map[string]bool{
		"api.example.com": true,
		"10.213.7.2":      true, // an address inside a CIDR entry
		"[fd00:7::9]":     true,
		"10.213.7.1":      false, // inside, but the host's
		"93.184.216.34":   false, // public, but only names open public addresses
		"169.254.169.254": false,
		"127.0.0.1":       false,
		"[::1]":           false,
		"other.example":   false,
	} {
		_, err := p.Targets(ctx, host)
		if ok != (err == nil) {
			t.Errorf("Targets(%s) = %v, want ok=%v", host, err, ok)
		}
	}
}

// TestCheckAddrNAT64Listed: listing the NAT64 prefix opens only what the
// IPv4 address behind it would open.
func TestCheckAddrNAT64Listed(t *testing.T) {
	p, err := NewPolicy(runspec.Network{Allow: []string{"64:ff9b::/96", "10.213.7.0/30"}},
		WithLocalAddrs(func() ([]netip.Addr, error) { return []netip.Addr{netip.MustParseAddr("192.0.2.2")}, nil }))
	if err != nil {
		t.Fatal(err)
	}
	for addr, ok := range map[string]bool{
		"64:ff9b::5db8:d822": true,  // 93.184.216.34
		"64:ff9b::ad5:702":   true,  // 10.213.7.2, listed
		"64:ff9b::7f00:1":    false, // 127.0.0.1
		"64:ff9b::a00:1":     false, // 10.0.0.1, private and not listed
		"64:ff9b::a9fe:a9fe": false, // 169.254.169.254
		"64:ff9b::c000:202":  false, // the host's own
		"64:ff9b::1:203":     false, // 0.1.2.3
		"64:ff9b::":          false, // 0.0.0.0
	} {
		if err := p.CheckAddr(netip.MustParseAddr(addr)); ok != (err == nil) {
			t.Errorf("CheckAddr(%s) = %v, want ok=%v", addr, err, ok)
		}
	}
}

func TestNewPolicyRefusesInvalidNetwork(t *testing.T) {
	if _, err := NewPolicy(runspec.Network{Allow: []string{"127.0.0.0/8"}}); err == nil {
		t.Fatal("a loopback CIDR made a policy")
	}
}

func testNetwork() runspec.Network {
	return runspec.Network{Allow: []string{"api.example.com", ".example.org"}}
}
