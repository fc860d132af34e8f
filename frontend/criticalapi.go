package frontend

import (
	"errors"
	"net/http"
)

// The critical-path routes of UIAPI:
//
//	GET /api/critical-path/{traceID}     a CriticalPath: the steps, where the time went and the
//	                                     controllers' reaction times
//	GET /api/controller-times/{traceID}  the controllers' reaction times alone ([]ControllerTimes)
//
// traceID is a display ID as the Jaeger API returns it (or a stored trace ID). Both answer in the
// JaegerResponse envelope and count as heavy requests.
func (a *UIAPI) registerCritical(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/critical-path/{traceID}", a.heavy(a.criticalPath))
	mux.HandleFunc("GET /api/controller-times/{traceID}", a.heavy(a.controllerTimes))
}

// critical resolves the request's trace and analyses it; false means an error answer was written.
func (a *UIAPI) critical(w http.ResponseWriter, r *http.Request) (CriticalPath, bool) {
	raw := r.PathValue("traceID")
	id, err := ParseTraceID(raw)
	if err != nil {
		jaegerError(w, http.StatusBadRequest, "%v", err)
		return CriticalPath{}, false
	}
	g, _, err := a.resolve(r.Context(), id)
	switch {
	case errors.Is(err, ErrBadTraceID):
		jaegerError(w, http.StatusBadRequest, "%v", err)
		return CriticalPath{}, false
	case errors.Is(err, ErrTraceNotFound):
		writeJSON(w, http.StatusNotFound, JaegerResponse{Errors: []JaegerError{{Code: http.StatusNotFound, Msg: err.Error(), TraceID: JaegerTraceID(id)}}})
		return CriticalPath{}, false
	case err != nil:
		a.internalError(w, "critical path", err)
		return CriticalPath{}, false
	}
	cp := AnalyzeCritical(g, JaegerTraceID(id), a.rules)
	if cp.Truncated != "" {
		a.truncated(r.Context())
	}
	return cp, true
}

func (a *UIAPI) criticalPath(w http.ResponseWriter, r *http.Request) {
	if cp, ok := a.critical(w, r); ok {
		writeJSON(w, http.StatusOK, JaegerResponse{Data: cp, Total: len(cp.Steps)})
	}
}

func (a *UIAPI) controllerTimes(w http.ResponseWriter, r *http.Request) {
	if cp, ok := a.critical(w, r); ok {
		writeJSON(w, http.StatusOK, JaegerResponse{Data: cp.Controllers, Total: len(cp.Controllers)})
	}
}
