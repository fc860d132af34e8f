package ui_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/kelemetry/kelemetry/frontend"
	"github.com/kelemetry/kelemetry/frontend/ui"
	"github.com/kelemetry/kelemetry/store"
)

// The UI next to the APIs it reads, on one mux.
func ExampleRegister() {
	st := store.NewMemory(store.MemoryConfig{})
	cfg := frontend.EngineConfig{} // set Window to the aggregator's window length
	mux := http.NewServeMux()
	frontend.NewJaegerAPI(st, cfg, nil).Register(mux)
	frontend.NewUIAPI(st, cfg, nil).Register(mux)
	ui.Register(mux)

	for _, path := range []string{"/", "/trace/ff210000006b0c5308001518316dfb35", "/static/app.js"} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		fmt.Println(path, rec.Code, rec.Header().Get("Content-Type"))
	}
	// Output:
	// / 200 text/html; charset=utf-8
	// /trace/ff210000006b0c5308001518316dfb35 200 text/html; charset=utf-8
	// /static/app.js 200 text/javascript; charset=utf-8
}
