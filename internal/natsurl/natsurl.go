// Package natsurl shows NATS server URLs to a person: as given, but for
// any password or token.
package natsurl

import (
	"net/url"
	"strings"
)

// Redact joins the servers urls names (each may be a comma-separated list,
// as --nats takes them) with ", ", each password, and a token (a user
// without one), replaced by xxxxx.
func Redact(urls ...string) string {
	var out []string
	for _, list := range urls {
		for s := range strings.SplitSeq(list, ",") {
			if s = strings.TrimSpace(s); s == "" {
				continue
			}
			if u, err := url.Parse(s); err == nil && u.User != nil {
				if _, ok := u.User.Password(); ok {
					u.User = url.UserPassword(u.User.Username(), "xxxxx")
				} else {
					u.User = url.User("xxxxx") // a user alone is a token
				}
				s = u.String()
			}
			out = append(out, s)
		}
	}
	return strings.Join(out, ", ")
}
