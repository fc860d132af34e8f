package jaegerproc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/kelemetry/kelemetry/e2e/kapi"
)

// Client reads the Jaeger query HTTP API (/api/services, /api/traces, /api/dependencies), as
// Jaeger UI and Grafana call it. It works against Jaeger Query and against Kelemetry's own
// Jaeger-compatible API alike, so that tests can compare both.
type Client struct {
	// BaseURL is the API's root, e.g. Jaeger.QueryURL.
	BaseURL string
	HTTP    *http.Client
}

// NewClient returns a client of the API at baseURL with a 30s request timeout.
func NewClient(baseURL string) *Client {
	return &Client{BaseURL: strings.TrimSuffix(baseURL, "/"), HTTP: &http.Client{Timeout: 30 * time.Second}}
}

// Client returns a client of Jaeger Query's HTTP API.
func (j *Jaeger) Client() *Client { return NewClient(j.QueryURL) }

// HTTPError is an answer other than 200.
type HTTPError struct {
	Path   string
	Status int
	// Body is the answer's body (Jaeger's JSON error envelope).
	Body string
}

func (e *HTTPError) Error() string {
	return fmt.Sprintf("GET %s: %d %s: %s", e.Path, e.Status, http.StatusText(e.Status), e.Body)
}

// envelope is the Jaeger API's answer.
type envelope[T any] struct {
	Data   T `json:"data"`
	Errors []struct {
		Code int    `json:"code"`
		Msg  string `json:"msg"`
	} `json:"errors"`
}

func getData[T any](ctx context.Context, c *Client, path string) (T, error) {
	var zero T
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.BaseURL+path, nil)
	if err != nil {
		return zero, err
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return zero, fmt.Errorf("GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return zero, fmt.Errorf("GET %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return zero, &HTTPError{Path: path, Status: resp.StatusCode, Body: strings.TrimSpace(string(body))}
	}
	var env envelope[T]
	if err := json.Unmarshal(body, &env); err != nil {
		return zero, fmt.Errorf("GET %s: %w", path, err)
	}
	if len(env.Errors) > 0 {
		return zero, fmt.Errorf("GET %s: error %d: %s", path, env.Errors[0].Code, env.Errors[0].Msg)
	}
	return env.Data, nil
}

// Services is GET /api/services (Kelemetry: the display modes).
func (c *Client) Services(ctx context.Context) ([]string, error) {
	return getData[[]string](ctx, c, "/api/services")
}

// Operations is GET /api/services/{service}/operations (Kelemetry: the clusters).
func (c *Client) Operations(ctx context.Context, service string) ([]string, error) {
	return getData[[]string](ctx, c, "/api/services/"+url.PathEscape(service)+"/operations")
}

// TraceQuery is a search of GET /api/traces.
type TraceQuery struct {
	Service   string
	Operation string
	// Tags are sent as the JSON object of the tags parameter (Jaeger UI's form).
	Tags map[string]string
	// Start and End bound the search (zero: the API's default lookback).
	Start, End time.Time
	// Limit is the number of results (0: the API's default).
	Limit int
}

// Values encodes the query as the API's parameters (times in microseconds).
func (q TraceQuery) Values() (url.Values, error) {
	v := url.Values{}
	v.Set("service", q.Service)
	if q.Operation != "" {
		v.Set("operation", q.Operation)
	}
	if len(q.Tags) > 0 {
		b, err := json.Marshal(q.Tags)
		if err != nil {
			return nil, err
		}
		v.Set("tags", string(b))
	}
	if !q.Start.IsZero() {
		v.Set("start", strconv.FormatInt(q.Start.UnixMicro(), 10))
	}
	if !q.End.IsZero() {
		v.Set("end", strconv.FormatInt(q.End.UnixMicro(), 10))
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return v, nil
}

// FindTraces is GET /api/traces?service=&operation=&tags=&start=&end=&limit=.
func (c *Client) FindTraces(ctx context.Context, q TraceQuery) ([]kapi.Trace, error) {
	if q.Service == "" {
		return nil, errors.New("jaegerproc: FindTraces needs a service")
	}
	v, err := q.Values()
	if err != nil {
		return nil, err
	}
	return getData[[]kapi.Trace](ctx, c, "/api/traces?"+v.Encode())
}

// Trace is GET /api/traces/{id}; a 404 is an *HTTPError with Status 404.
func (c *Client) Trace(ctx context.Context, id string) (kapi.Trace, error) {
	trs, err := getData[[]kapi.Trace](ctx, c, "/api/traces/"+url.PathEscape(id))
	if err != nil {
		return kapi.Trace{}, err
	}
	if len(trs) != 1 {
		return kapi.Trace{}, fmt.Errorf("GET /api/traces/%s: %d traces, want 1", id, len(trs))
	}
	return trs[0], nil
}

// Dependency is an edge of GET /api/dependencies (Kelemetry: parent resource -> child
// resource, with the number of linked object pairs).
type Dependency struct {
	Parent    string `json:"parent"`
	Child     string `json:"child"`
	CallCount uint64 `json:"callCount"`
}

// Dependencies is GET /api/dependencies?endTs=&lookback= (milliseconds).
func (c *Client) Dependencies(ctx context.Context, end time.Time, lookback time.Duration) ([]Dependency, error) {
	v := url.Values{}
	v.Set("endTs", strconv.FormatInt(end.UnixMilli(), 10))
	v.Set("lookback", strconv.FormatInt(lookback.Milliseconds(), 10))
	return getData[[]Dependency](ctx, c, "/api/dependencies?"+v.Encode())
}
