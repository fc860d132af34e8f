// Package memory is the in-memory store backend: a store.Store bounded by a number of spans
// (Config.MaxSpans) that evicts its oldest windows first, for tests and runs without a data
// directory. Everything is lost on exit.
package memory
