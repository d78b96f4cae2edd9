package consumer

import (
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// TestDeletionInProgress: the create errors a deletion in progress gives
// are tried again; other create errors, the same code with another cause
// included, are not.
func TestDeletionInProgress(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&jetstream.APIError{Code: 404, ErrorCode: jetstream.JSErrCodeConsumerDoesNotExist, Description: "consumer does not exist"}, true},
		{fmt.Errorf("wrapped: %w", &jetstream.APIError{Code: 500, ErrorCode: 10012, Description: "error creating store for consumer"}), true},
		{&jetstream.APIError{Code: 500, ErrorCode: 10012, Description: "open /tmp/TestCannotConsume1167206773/001/jetstream/$G/streams/BATON_JOBS/obs/workers/o.dat.tmp: no such file or directory"}, true},
		{&jetstream.APIError{Code: 500, ErrorCode: 10012, Description: "open /var/lib/nats/jetstream/$G/streams/BATON_JOBS/obs/workers/o.dat.tmp: permission denied"}, false},
		{&jetstream.APIError{Code: 500, ErrorCode: 10012, Description: "consumer already exists"}, false},
		{&jetstream.APIError{Code: 400, ErrorCode: 10100, Description: "filtered consumer not unique on workqueue stream"}, false},
		{errors.New("nats: timeout"), false},
		{nil, false},
	} {
		if got := deletionInProgress(tc.err); got != tc.want {
			t.Errorf("deletionInProgress(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
