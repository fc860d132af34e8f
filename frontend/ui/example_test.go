package ui_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/kelemetry/kelemetry/frontend"
	"github.com/kelemetry/kelemetry/frontend/ui"
	"github.com/kelemetry/kelemetry/internal/query"
	"github.com/kelemetry/kelemetry/store/memory"
	"github.com/kelemetry/kelemetry/telemetry"
)

// The UI next to the APIs it reads, on one mux.
func ExampleRegister() {
	st := memory.New(memory.Config{}, 0)
	e := frontend.NewEngine(st, 0, frontend.Config{}) // 0: the default window length
	mux := http.NewServeMux()
	query.NewJaegerAPI(e, telemetry.Settings{}).Register(mux)
	query.NewUIAPI(e, telemetry.Settings{}).Register(mux)
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
