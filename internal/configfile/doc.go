// Package configfile reads Kelemetry's YAML configuration strictly and says what is wrong in a
// way a person can act on: one Problem per unknown key (with the closest known key, or where a
// moved key went), value of the wrong type (with an example of a valid one) or malformed
// command-line override, each with its file and line. It also applies --set overrides and reads
// sizes written with a unit (10Gi) for the keys that hold bytes.
package configfile
