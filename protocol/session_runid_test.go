package protocol

import (
	"strings"
	"testing"
)

func TestSessionRunID(t *testing.T) {
	long := strings.Repeat("s", 128)
	for _, tc := range []struct{ session, msgID string }{{"s1", "m1"}, {long, "m1"}, {"s1", ""}} {
		id := SessionRunID(tc.session, tc.msgID)
		if !ValidRunID(id) || !strings.HasPrefix(id, tc.session[:min(len(tc.session), 100)]) {
			t.Errorf("SessionRunID(%.10q, %q) = %q", tc.session, tc.msgID, id)
		}
		if tc.msgID != "" && SessionRunID(tc.session, tc.msgID) != id {
			t.Errorf("two sends of one message id name two runs")
		}
	}
	if SessionRunID("s1", "") == SessionRunID("s1", "") {
		t.Error("two sends without a message id name one run")
	}
}
