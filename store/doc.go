// Package store keeps finished spans so the frontend can read them back: an embedded persistent
// store on Pebble (OpenPebble) and a bounded in-memory store for tests and runs without a data
// directory (NewMemory). Both are aggregator.Sinks that upsert by span ID, and both answer the two
// questions the frontend asks: which objects have traces in a time range (FindObjects) and what is
// in one trace (GetTrace).
//
// Data is organised in the aggregator's time windows: one trace per object per window. Retention
// removes whole windows, oldest first, by age and by size on disk (Pebble) or by span count
// (Memory).
package store
