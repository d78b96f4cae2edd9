package worker

import (
	"errors"
	"strings"
	"testing"
)

func TestParseWorkerRecord(t *testing.T) {
	good := `{"worker":"n1-123-ab","node":"n1","session":42,"pid":123,"start":987654,"pidns":4026531836}`
	for _, c := range []struct {
		name, in string
		ok       bool
	}{
		{"good", good, true},
		{"unknown field", strings.Replace(good, `"pid":`, `"uid":0,"pid":`, 1), false},
		{"no session", strings.Replace(good, `"session":42`, `"session":0`, 1), false},
		{"no pid", strings.Replace(good, `"pid":123`, `"pid":0`, 1), false},
		{"negative pid", strings.Replace(good, `"pid":123`, `"pid":-1`, 1), false},
		{"no start", strings.Replace(good, `"start":987654`, `"start":0`, 1), false},
		{"no pid namespace", strings.Replace(good, `"pidns":4026531836`, `"pidns":0`, 1), false},
		{"bad worker id", strings.Replace(good, `"n1-123-ab"`, `"../x"`, 1), false},
		{"bad node", strings.Replace(good, `"node":"n1"`, `"node":"a.b"`, 1), false},
		{"trailing data", good + `{}`, false},
		{"not JSON", `pid=123`, false},
		{"empty", ``, false},
		{"too large", `{"worker":"` + strings.Repeat("a", maxWorkerRecord) + `"}`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseWorkerRecord([]byte(c.in))
			if (err == nil) != c.ok {
				t.Fatalf("parseWorkerRecord = %v, want ok %v", err, c.ok)
			}
			if err != nil && !errors.Is(err, errBadRecord) {
				t.Errorf("error %v is not errBadRecord", err)
			}
		})
	}
}

func FuzzParseWorkerRecord(f *testing.F) {
	f.Add(`{"worker":"n1-123-ab","node":"n1","session":42,"pid":123,"start":987654,"pidns":4026531836}`)
	f.Add(`{"worker":"w","node":"n","session":1,"pid":1,"start":1,"pidns":1} `)
	f.Add(`{}`)
	f.Fuzz(func(t *testing.T, in string) {
		// Whatever parses names a process and a session: nothing is
		// ended for a record that names none.
		r, err := parseWorkerRecord([]byte(in))
		if err != nil {
			return
		}
		if r.Session == 0 || r.PID <= 0 || r.Start == 0 || r.PIDNS == 0 || !workerIDPattern.MatchString(r.Worker) || !workerIDPattern.MatchString(r.Node) {
			t.Fatalf("accepted %+v", r)
		}
	})
}

func TestWorkerFileRefusesPaths(t *testing.T) {
	for _, id := range []string{"", "..", "a/b", "a.json", strings.Repeat("x", 129)} {
		if _, err := workerFile("/state", id); !errors.Is(err, errBadRecord) {
			t.Errorf("workerFile(%q) = %v, want errBadRecord", id, err)
		}
	}
	if p, err := workerFile("/state", "n1-1-ab"); err != nil || p != "/state/workers/n1-1-ab.json" {
		t.Errorf("workerFile = %q, %v", p, err)
	}
}

func TestParseStatStart(t *testing.T) {
	// Field 22 is the start time; the command name may hold spaces and ')'.
	tail := " S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 777 19 20\n"
	for _, c := range []struct {
		name, in string
		want     uint64
		ok       bool
	}{
		{"plain", "123 (baton)" + tail, 777, true},
		{"spaces and parens in the name", "123 (a) b (c))" + tail, 777, true},
		{"no name", "123 baton S 1 2", 0, false},
		{"short", "123 (baton) S 1 2 3", 0, false},
		{"not a number", "123 (baton) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 x 19\n", 0, false},
		{"empty", "", 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := parseStatStart([]byte(c.in))
			if (err == nil) != c.ok || got != c.want {
				t.Fatalf("parseStatStart = %d, %v; want %d, ok %v", got, err, c.want, c.ok)
			}
		})
	}
}

func FuzzParseStatStart(f *testing.F) {
	f.Add("123 (baton) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 777 19 20\n")
	f.Add("1 ())) R")
	f.Fuzz(func(t *testing.T, in string) {
		// Kernel text never crashes the reader.
		_, _ = parseStatStart([]byte(in))
	})
}
