// Package pebble is the embedded store backend of the all-in-one: a store.Store in a Pebble
// database under Config.Dir that survives restarts. Spans are encoded compactly (schema version
// 2; a store of version 1 is read as it is and marked 2 once writable, and an earlier Kelemetry
// then refuses it); values of 256 bytes or more are kept in Pebble's blob files, out of the
// tables that compactions rewrite. Export is all or nothing and commits the spans of consecutive Exports
// together; Sync makes them durable (the audit queues call it before they acknowledge).
// Retention deletes whole windows by age (MaxAge, and windows dated too far in the future) and by
// size (MaxBytes, the folder as du counts it), never the current window for size. A full or
// failing disk is an operating state: writes are refused with store.ErrUnavailable, reads keep
// working, Health says why, and the store recovers by itself when a probe write succeeds.
package pebble
