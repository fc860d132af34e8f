// Package instrument creates the OpenTelemetry instruments of Kelemetry's packages: Meter keeps
// the errors of every instrument a constructor creates (an instrument that cannot be created is a
// no-op one: a metric never stops the pipeline), and FixedCounter is a counter over a fixed set
// of attribute sets, added to without allocating on hot paths.
package instrument
