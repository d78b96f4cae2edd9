package stage

import "strings"

// hasDefaultRoute4 reports whether a /proc/net/route table holds a
// default route (destination and mask 0).
func hasDefaultRoute4(table string) bool {
	for i, line := range strings.Split(table, "\n") {
		f := strings.Fields(line)
		if i == 0 || len(f) < 8 {
			continue // the header, or not a route
		}
		if f[1] == "00000000" && f[7] == "00000000" {
			return true
		}
	}
	return false
}

// hasDefaultRoute6 reports whether a /proc/net/ipv6_route table holds a
// default route (::/0) through an interface other than loopback.
func hasDefaultRoute6(table string) bool {
	for _, line := range strings.Split(table, "\n") {
		f := strings.Fields(line)
		if len(f) < 10 {
			continue
		}
		if f[0] == strings.Repeat("0", 32) && f[1] == "00" && f[9] != "lo" {
			return true
		}
	}
	return false
}
