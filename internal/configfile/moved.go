package configfile

// Moved are the keys of Kelemetry's configuration (kelemetry.Config) that moved, and where to:
// a file that still uses one is told what to write instead.
var Moved = map[string]string{
	"aggregator.window":  "window (the top-level key: one window for every part)",
	"store.window":       "window (the top-level key: one window for every part)",
	"memory.window":      "window (the top-level key: one window for every part)",
	"event.window":       "window (the top-level key: one window for every part)",
	"linker.objectCache": "objectCache (a top-level key)",
	"linker.discovery":   "discovery (a top-level key)",
}
