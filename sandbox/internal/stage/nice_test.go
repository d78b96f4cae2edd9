package stage

import "testing"

func TestParseTasks(t *testing.T) {
	got, err := parseTasks([]string{"12", "7", "130"})
	if err != nil || len(got) != 3 || got[0] != 12 || got[1] != 7 || got[2] != 130 {
		t.Fatalf("parseTasks = %v, %v", got, err)
	}
	for _, bad := range [][]string{{"x"}, {"0"}, {"-3"}, {""}} {
		if _, err := parseTasks(bad); err == nil {
			t.Errorf("parseTasks(%q) took it", bad)
		}
	}
}

func TestParseAutogroupNice(t *testing.T) {
	for in, want := range map[string]int{"/autogroup-45 nice 0\n": 0, "/autogroup-1 nice 10": 10, "/autogroup-9 nice -20\n": -20} {
		if n, ok := parseAutogroupNice(in); !ok || n != want {
			t.Errorf("parseAutogroupNice(%q) = %d, %v; want %d", in, n, ok, want)
		}
	}
	for _, bad := range []string{"", "\n", "/autogroup-1 nice", "/autogroup-1 nice x", "/autogroup-1 nice 20", "autogroup-1 nice 3", "/autogroup-1 prio 3"} {
		if _, ok := parseAutogroupNice(bad); ok {
			t.Errorf("parseAutogroupNice(%q) took it", bad)
		}
	}
}
