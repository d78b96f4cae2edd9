package worker

import (
	"testing"

	"github.com/batonhq/baton/protocol"
)

func TestWaitReason(t *testing.T) {
	busy := []protocol.WorkerLoad{{Worker: "a"}, {Worker: "b"}}
	oneFree := []protocol.WorkerLoad{{Worker: "a", Free: 1}, {Worker: "b"}}
	fullClaude := []protocol.WorkerLoad{{Worker: "a", Free: 2, FullProfiles: []string{"claude"}}, {Worker: "b"}}
	for _, tc := range []struct {
		name    string
		i, open int
		profile string
		loads   []protocol.WorkerLoad
		want    protocol.WaitReason
	}{
		{"key full", 0, 0, "claude", oneFree, protocol.WaitKeyLimit},
		{"past the key's free slots", 2, 2, "claude", oneFree, protocol.WaitKeyLimit},
		{"no free worker", 0, -1, "claude", busy, protocol.WaitNoWorker},
		{"no worker answered", 0, 1, "claude", nil, protocol.WaitNoWorker},
		{"profile full where free", 0, -1, "claude", fullClaude, protocol.WaitProfileLimit},
		{"another profile has room", 0, -1, "codex", fullClaude, protocol.WaitStarting},
		{"next, with room", 0, 3, "claude", oneFree, protocol.WaitStarting},
		{"behind the free slots", 1, -1, "claude", oneFree, protocol.WaitBehind},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := waitReason(tc.i, tc.open, tc.profile, tc.loads); got != tc.want {
				t.Fatalf("waitReason = %s, want %s", got, tc.want)
			}
		})
	}
}
