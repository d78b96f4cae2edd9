package sandbox

import "testing"

func TestHiddenTop(t *testing.T) {
	cases := []struct {
		name       string
		runDir     string
		unsearched []string
		want       string
	}{
		{"all searchable", "/var/lib/baton/runs/r1", nil, "/var/lib/baton/runs"},
		{"state dir 0700", "/var/lib/baton/runs/r1", []string{"/var/lib/baton"}, "/var/lib/baton"},
		{"highest wins", "/tmp/Test1/001/runs/r1", []string{"/tmp/Test1", "/tmp/Test1/001"}, "/tmp/Test1"},
		{"runs dir itself unsearchable", "/srv/runs/r1", []string{"/srv/runs"}, "/srv/runs"},
		{"run dir itself is not looked at", "/srv/runs/r1", []string{"/srv/runs/r1"}, "/srv/runs"},
		{"shallow", "/runs/r1", []string{"/runs"}, "/runs"},
		{"top level dir unsearchable", "/root/.cache/baton/r1", []string{"/root"}, "/root"},
	}
	for _, c := range cases {
		searchable := func(p string) bool {
			for _, u := range c.unsearched {
				if p == u {
					return false
				}
			}
			return true
		}
		if got := hiddenTop(c.runDir, searchable); got != c.want {
			t.Errorf("%s: hiddenTop(%q) = %q, want %q", c.name, c.runDir, got, c.want)
		}
	}
}
