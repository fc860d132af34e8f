// Package query is what every store backend shares: the questions a store's Reader answers
// (ObjectQuery, TraceQuery), its answers (ObjectWindows, TraceRef), the errors it returns, and
// Matcher, the matching of object keys, windows and event attributes those answers follow.
// Package store re-exports the types and the errors; they are here so that the backends below
// store (which store imports to open them) need not import it.
package query
