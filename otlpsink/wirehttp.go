package otlpsink

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// maxResponseBytes bounds the answer body read from an OTLP/HTTP receiver.
const maxResponseBytes = 1 << 20

// httpUpload returns the function that POSTs an encoded request to url (OTLP/HTTP, binary
// protobuf) with the client, headers and compression given. Its errors are worded as the SDK's
// OTLP/HTTP exporter words them, which classify reads: "failed to send to URL: CODE ..." for an
// answer not to retry (413 included), a plain error for one to retry (429, 502, 503, 504) and
// for a transport failure, and the partial-success message.
func httpUpload(client *http.Client, url string, headers map[string]string, gzipped bool) func(context.Context, []byte) error {
	return func(ctx context.Context, req []byte) error {
		body := req
		if gzipped {
			var buf bytes.Buffer
			zw := gzip.NewWriter(&buf)
			if _, err := zw.Write(req); err != nil {
				return fmt.Errorf("gzip request: %w", err)
			}
			if err := zw.Close(); err != nil {
				return fmt.Errorf("gzip request: %w", err)
			}
			body = buf.Bytes()
		}
		hr, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return err
		}
		for k, v := range headers {
			hr.Header.Set(k, v)
		}
		hr.Header.Set("Content-Type", "application/x-protobuf")
		hr.Header.Set("User-Agent", "kelemetry-otlpsink")
		if gzipped {
			hr.Header.Set("Content-Encoding", "gzip")
		}
		resp, err := client.Do(hr)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		data, rerr := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
		switch sc := resp.StatusCode; {
		case sc >= 200 && sc < 300:
			if rerr != nil || len(data) == 0 {
				return nil // the spans were taken; an unreadable answer only hides a partial success
			}
			var r coltracepb.ExportTraceServiceResponse
			if err := proto.Unmarshal(data, &r); err != nil {
				return nil // as above
			}
			if ps := r.GetPartialSuccess(); ps != nil && (ps.GetRejectedSpans() > 0 || ps.GetErrorMessage() != "") {
				return errors.New(partialSuccessMessage(ps.GetErrorMessage(), ps.GetRejectedSpans()))
			}
			return nil
		case sc == http.StatusTooManyRequests, sc == http.StatusBadGateway, sc == http.StatusServiceUnavailable, sc == http.StatusGatewayTimeout:
			return fmt.Errorf("retry-able request failure: %s: %s", resp.Status, answerText(data))
		default:
			return fmt.Errorf("failed to send to %s: %s (%s)", url, strconv.Itoa(sc)+" "+http.StatusText(sc), answerText(data))
		}
	}
}

// answerText is a receiver's answer body for an error message: short, one line.
func answerText(b []byte) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// newHTTPClient is the client of httpUpload: TLS as configured (tc, nil for plaintext).
func newHTTPClient(tc *tls.Config) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tc
	tr.MaxIdleConnsPerHost = 4
	return &http.Client{Transport: tr}
}
