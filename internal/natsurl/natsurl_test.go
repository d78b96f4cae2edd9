package natsurl_test

import (
	"testing"

	"github.com/batonhq/baton/internal/natsurl"
)

func TestRedact(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want string
	}{
		{[]string{"nats://127.0.0.1:4222"}, "nats://127.0.0.1:4222"},
		{[]string{"nats://u:secret@a:4222, nats://b:4222"}, "nats://u:xxxxx@a:4222, nats://b:4222"},
		{[]string{"nats://token@a:4222", "", "tls://v:p@c"}, "nats://xxxxx@a:4222, tls://v:xxxxx@c"},
	} {
		if got := natsurl.Redact(tc.in...); got != tc.want {
			t.Errorf("Redact(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
