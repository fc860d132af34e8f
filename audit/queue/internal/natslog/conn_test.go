package natslog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
)

func TestClassify(t *testing.T) {
	brokenPipe := &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.EPIPE)}
	cases := []struct {
		name string
		err  error
		want error // nil: returned as it is
	}{
		{"broken pipe while the server goes away", brokenPipe, ErrUnavailable},
		{"connection reset", fmt.Errorf("flush: %w", syscall.ECONNRESET), ErrUnavailable},
		{"eof", io.EOF, ErrUnavailable},
		{"reconnecting", nats.ErrConnectionReconnecting, ErrUnavailable},
		{"no responders", nats.ErrNoResponders, ErrUnavailable},
		{"deadline", context.DeadlineExceeded, ErrUnavailable},
		{"no quorum", &jetstream.APIError{Code: 503, Description: "JetStream system temporarily unavailable"}, ErrUnavailable},
		{"stream full", &jetstream.APIError{Code: 503, Description: "maximum messages exceeded"}, ErrFull},
		{"message too large", &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamMessageExceedsMaximum}, nil},
		{"canceled", context.Canceled, nil},
		{"other", errors.New("bad subject"), nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := classify(c.err)
			assert.ErrorIs(t, got, c.err, "the cause is kept")
			for _, kind := range []error{ErrUnavailable, ErrFull} {
				want := c.want != nil && errors.Is(c.want, kind)
				assert.Equal(t, want, errors.Is(got, kind), "%v", kind)
			}
		})
	}
}
