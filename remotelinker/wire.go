package remotelinker

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/kelemetry/kelemetry/aggregator"
)

// wireVersion is the version of wireJob and wireResult this package writes and reads. A worker answers a
// job of another version with an error whose code is codeUnsupportedVersion.
const wireVersion = 1

// Error codes of wireResult.Code.
const (
	// codeBadRequest: the job could not be decoded or names no object.
	codeBadRequest = "bad_request"
	// codeUnsupportedVersion: the job's version is not wireVersion.
	codeUnsupportedVersion = "unsupported_version"
	// codeBusy: the worker runs as many jobs as it may; another worker or a later job may do.
	codeBusy = "busy"
	// codeLookup: the linker's Lookup failed (or panicked).
	codeLookup = "lookup"
	// codeStopping: the worker is shutting down.
	codeStopping = "stopping"
	// codeTimeout: the Lookup did not finish within the job's time; the client counts it as a
	// timeout.
	codeTimeout = "timeout"
)

// wireJob is the request a Client sends: one object to link.
type wireJob struct {
	// Version is wireVersion.
	Version int `json:"v"`
	// Linker is the name of the linker the job is for.
	Linker string `json:"linker"`
	// Object is the object to link; its Cluster names its cluster.
	Object aggregator.ObjectRef `json:"object"`
	// Body is the object as JSON, absent when the source did not see it.
	Body json.RawMessage `json:"body,omitempty"`
	// MetaHash is aggregator.Object.MetaHash (0: unknown).
	MetaHash uint64 `json:"metaHash,omitempty"`
	// Sent is when the client sent the job.
	Sent time.Time `json:"sent"`
	// TimeoutMillis is how long the client waits for the reply: the worker gives up after it.
	TimeoutMillis int64 `json:"timeoutMs,omitempty"`
}

// wireResult is a worker's reply: the links, or an error.
type wireResult struct {
	// Version is wireVersion.
	Version int `json:"v"`
	// Links are the object's links (the Lookup's result).
	Links []aggregator.Link `json:"links,omitempty"`
	// Error is set when the job failed; Code then says why (codeBadRequest, ...).
	Error string `json:"error,omitempty"`
	// Code classifies Error.
	Code string `json:"code,omitempty"`
}

// errBadReply is wrapped by Lookup's error when the reply cannot be decoded, has another version,
// or has too many links.
var errBadReply = errors.New("remotelinker: bad reply")

// errRemote is wrapped by Lookup's error when the worker answered with an error.
var errRemote = errors.New("remotelinker: worker error")

// decodeJob decodes and checks a job; its error is what the worker answers.
func decodeJob(data []byte) (wireJob, *wireResult) {
	var probe struct {
		Version int `json:"v"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return wireJob{}, errResult(codeBadRequest, fmt.Errorf("decode job: %w", err))
	}
	if probe.Version != wireVersion {
		return wireJob{}, errResult(codeUnsupportedVersion, fmt.Errorf("job version %d, this worker speaks %d", probe.Version, wireVersion))
	}
	var job wireJob
	if err := json.Unmarshal(data, &job); err != nil {
		return wireJob{}, errResult(codeBadRequest, fmt.Errorf("decode job: %w", err))
	}
	if job.Object.Resource == "" || job.Object.Name == "" {
		return wireJob{}, errResult(codeBadRequest, fmt.Errorf("job object %q needs a resource and a name", job.Object.String()))
	}
	return job, nil
}

func errResult(code string, err error) *wireResult {
	return &wireResult{Version: wireVersion, Code: code, Error: err.Error()}
}

// decodeResult decodes a reply into links, or the error it carries.
func decodeResult(data []byte, maxLinks int) ([]aggregator.Link, error) {
	var res wireResult
	if err := json.Unmarshal(data, &res); err != nil {
		return nil, fmt.Errorf("%w: %w", errBadReply, err)
	}
	if res.Version != wireVersion {
		return nil, fmt.Errorf("%w: version %d, want %d", errBadReply, res.Version, wireVersion)
	}
	if res.Error != "" || res.Code != "" {
		return nil, &remoteError{code: res.Code, msg: res.Error}
	}
	if len(res.Links) > maxLinks {
		return nil, fmt.Errorf("%w: %d links, at most %d", errBadReply, len(res.Links), maxLinks)
	}
	return res.Links, nil
}

// remoteError is a worker's error reply; it wraps errRemote, and errTimeout for codeTimeout.
type remoteError struct{ code, msg string }

func (e *remoteError) Error() string { return "remotelinker: worker error: " + e.code + ": " + e.msg }

func (e *remoteError) Unwrap() []error {
	if e.code == codeTimeout {
		return []error{errRemote, errTimeout}
	}
	return []error{errRemote}
}
