package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/batonhq/baton/sandbox/runspec"
)

var (
	// ErrNotAllowed: the name is not on the allowlist.
	ErrNotAllowed = errors.New("not on the allowlist")
	// ErrRefused: the address is one the policy never or not here allows.
	ErrRefused = errors.New("address refused")
)

// Policy decides what an agent may reach.
type Policy struct {
	net      runspec.Network
	prefixes []netip.Prefix
	resolve  func(ctx context.Context, host string) ([]netip.Addr, error)
	local    func() ([]netip.Addr, error)

	mu        sync.Mutex
	localAt   time.Time
	localAddr []netip.Addr
}

// Option configures a Policy.
type Option func(*Policy)

// NewPolicy is the policy of n, which must validate.
func NewPolicy(n runspec.Network, opts ...Option) (*Policy, error) {
	if err := n.Validate(); err != nil {
		return nil, fmt.Errorf("egress: %w", err)
	}
	p := &Policy{net: n, prefixes: n.Prefixes(), resolve: hostResolve, local: InterfaceAddrs}
	for _, o := range opts {
		o(p)
	}
	return p, nil
}

func hostResolve(ctx context.Context, host string) ([]netip.Addr, error) {
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

// InterfaceAddrs lists the addresses of the host's interfaces.
func InterfaceAddrs() ([]netip.Addr, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok {
				out = append(out, ip.Unmap())
			}
		}
	}
	return out, nil
}

// localTTL is how long the host's addresses are cached.
const localTTL = time.Second

func (p *Policy) localAddrs() ([]netip.Addr, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if time.Since(p.localAt) < localTTL && p.localAt != (time.Time{}) {
		return p.localAddr, nil
	}
	addrs, err := p.local()
	if err != nil {
		return nil, err
	}
	p.localAddr, p.localAt = addrs, time.Now()
	return addrs, nil
}

// nonPublic are ranges an agent reaches only if a CIDR entry lists them,
// beyond what netip calls private and link-local.
var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("100.64.0.0/10"),   // carrier-grade NAT
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("192.0.2.0/24"),    // documentation
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"), // documentation
	netip.MustParsePrefix("203.0.113.0/24"),  // documentation
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved
	netip.MustParsePrefix("64:ff9b::/96"),    // NAT64: another address inside
	netip.MustParsePrefix("64:ff9b:1::/48"),  // local NAT64
	netip.MustParsePrefix("2001::/32"),       // Teredo
	netip.MustParsePrefix("2001:db8::/32"),   // documentation
	netip.MustParsePrefix("2002::/16"),       // 6to4: an IPv4 address inside
}

// neverPublic are ranges no allowlist opens: 0.0.0.0/8 means "this host"
// to some stacks, and the deprecated IPv4-compatible ::/96 embeds an IPv4
// address that some stacks translate.
var neverPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("::/96"),
}

// nat64 is the well-known NAT64 prefix: its last 32 bits are an IPv4
// address the translator connects to.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// CheckAddr says whether the agent may reach a, and why not.
func (p *Policy) CheckAddr(a netip.Addr) error {
	a = a.Unmap().WithZone("")
	switch {
	case !a.IsValid():
		return fmt.Errorf("%w: invalid address", ErrRefused)
	case a.IsLoopback(), a.IsUnspecified(), a.IsMulticast(), a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return fmt.Errorf("%w: %s is a loopback, unspecified or multicast address", ErrRefused, a)
	}
	for _, pr := range neverPublic {
		if pr.Contains(a) {
			return fmt.Errorf("%w: %s is in %s, which is never reachable", ErrRefused, a, pr)
		}
	}
	if nat64.Contains(a) {
		// Even with the NAT64 prefix listed, the address it leads to
		// must pass on its own.
		b := a.As16()
		if err := p.CheckAddr(netip.AddrFrom4([4]byte(b[12:]))); err != nil {
			return fmt.Errorf("%w: %s is NAT64 for a refused address: %v", ErrRefused, a, err)
		}
	}
	local, err := p.localAddrs()
	if err != nil {
		return fmt.Errorf("%w: cannot list the host's addresses: %v", ErrRefused, err)
	}
	if slices.Contains(local, a) {
		return fmt.Errorf("%w: %s is an address of the host", ErrRefused, a)
	}
	for _, pr := range p.prefixes {
		if pr.Contains(a) {
			return nil
		}
	}
	switch {
	case a.IsPrivate():
		return fmt.Errorf("%w: %s is a private address and no CIDR entry lists it", ErrRefused, a)
	case a.IsLinkLocalUnicast():
		return fmt.Errorf("%w: %s is a link-local address and no CIDR entry lists it", ErrRefused, a)
	case !a.IsGlobalUnicast():
		return fmt.Errorf("%w: %s is not a global unicast address", ErrRefused, a)
	}
	for _, pr := range nonPublic {
		if pr.Contains(a) {
			return fmt.Errorf("%w: %s is in %s, which is not public, and no CIDR entry lists it", ErrRefused, a, pr)
		}
	}
	return nil
}

// AllowsName reports whether host is on the allowlist.
func (p *Policy) AllowsName(host string) bool { return p.net.AllowsName(host) }

// maxAnswers bounds the addresses one lookup yields.
const maxAnswers = 16

// Lookup resolves an allowed name to the addresses the agent may reach: a
// pinned address (Network.Hosts) or the resolver's answer, each checked
// with CheckAddr. It fails with ErrNotAllowed for a name off the list
// (without resolving it), and with ErrRefused when no address passes.
func (p *Policy) Lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if !p.net.AllowsName(host) {
		return nil, fmt.Errorf("%q: %w", host, ErrNotAllowed)
	}
	var found []netip.Addr
	if pinned, ok := p.net.Hosts[host]; ok {
		a, err := netip.ParseAddr(pinned)
		if err != nil {
			return nil, fmt.Errorf("%q: pinned address %q: %w", host, pinned, err)
		}
		found = []netip.Addr{a}
	} else {
		var err error
		if found, err = p.resolve(ctx, host); err != nil {
			return nil, fmt.Errorf("%q: resolve: %w", host, err)
		}
	}
	var ok []netip.Addr
	var why error
	for _, a := range found {
		if err := p.CheckAddr(a); err != nil {
			why = err
			continue
		}
		if a = a.Unmap(); !slices.Contains(ok, a) && len(ok) < maxAnswers {
			ok = append(ok, a)
		}
	}
	if len(ok) == 0 {
		if why == nil {
			why = fmt.Errorf("%w: no address", ErrRefused)
		}
		return nil, fmt.Errorf("%q: %w", host, why)
	}
	return ok, nil
}

// Targets are the addresses a connection to host (a name or an address
// literal) may use.
func (p *Policy) Targets(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")); err == nil {
		a = a.Unmap()
		listed := false
		for _, pr := range p.prefixes {
			listed = listed || pr.Contains(a)
		}
		if !listed {
			return nil, fmt.Errorf("%w: %s: an address is reachable only inside a CIDR entry", ErrRefused, a)
		}
		if err := p.CheckAddr(a); err != nil {
			return nil, err
		}
		return []netip.Addr{a}, nil
	}
	return p.Lookup(ctx, host)
}
