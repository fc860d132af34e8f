package otlpsink

import (
	"regexp"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// outcome is what a failed export attempt means for its batch.
type outcome int

const (
	// retry: the receiver is down, slow or overloaded; the batch is sent again later.
	retry outcome = iota
	// rejected: the receiver refused the batch for good (the OTLP specification's
	// non-retryable answers, e.g. invalid data or wrong credentials); sending it again cannot
	// help and would hold the queue forever.
	rejected
	// partial: the receiver took the batch but rejected some of its spans (OTLP partial
	// success); sending it again would duplicate the rest.
	partial
	// tooLarge: the request exceeded the receiver's size limit (gRPC ResourceExhausted "larger
	// than max", HTTP 413); smaller requests may pass.
	tooLarge
)

// partialPrefix starts the error the OTLP exporters return for a partial success.
const partialPrefix = "OTLP partial success:"

// httpRejected matches the OTLP/HTTP exporter's error for an answer it does not retry.
var httpRejected = regexp.MustCompile(`^failed to send to \S+: [0-9]{3}\b`)

// httpTooLarge matches the OTLP/HTTP exporter's error for 413 Request Entity Too Large.
var httpTooLarge = regexp.MustCompile(`^failed to send to \S+: 413\b`)

// partialRejected extracts the number of rejected spans from a partial-success error.
var partialRejected = regexp.MustCompile(`\(([0-9]+) spans rejected\)$`)

// classify says what err, from an export attempt, means; for a partial success it also returns
// the number of spans the receiver rejected.
func classify(err error) (outcome, int64) {
	leaves := leafErrors(err, nil)
	var rejectedSpans int64
	allPartial := len(leaves) > 0
	for _, e := range leaves {
		msg := e.Error()
		if strings.HasPrefix(msg, partialPrefix) {
			if m := partialRejected.FindStringSubmatch(msg); m != nil {
				n, _ := strconv.ParseInt(m[1], 10, 64)
				rejectedSpans += n
			}
			continue
		}
		allPartial = false
	}
	if allPartial {
		return partial, rejectedSpans
	}
	if st, ok := status.FromError(err); ok {
		if st.Code() == codes.ResourceExhausted && strings.Contains(st.Message(), "larger than max") {
			return tooLarge, 0
		}
		switch st.Code() {
		case codes.InvalidArgument, codes.NotFound, codes.AlreadyExists, codes.PermissionDenied,
			codes.FailedPrecondition, codes.Unimplemented, codes.Unauthenticated:
			return rejected, 0
		}
	}
	for _, e := range leaves {
		if httpTooLarge.MatchString(e.Error()) {
			return tooLarge, 0
		}
		if httpRejected.MatchString(e.Error()) {
			return rejected, 0
		}
	}
	return retry, 0
}

// leafErrors appends the errors of err's tree that wrap nothing, or that are the exporters'
// own messages (which wrap only a detail), to dst.
func leafErrors(err error, dst []error) []error {
	if err == nil {
		return dst
	}
	msg := err.Error()
	if strings.HasPrefix(msg, partialPrefix) || httpRejected.MatchString(msg) {
		return append(dst, err)
	}
	switch u := err.(type) { //nolint:errorlint // the walk itself unwraps
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			dst = leafErrors(e, dst)
		}
		return dst
	case interface{ Unwrap() error }:
		if inner := u.Unwrap(); inner != nil {
			return leafErrors(inner, dst)
		}
	}
	return append(dst, err)
}
