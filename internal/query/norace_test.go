//go:build !race

package query_test

// raceEnabled is set when the tests run with the race detector, which makes the memory and
// time figures of some tests meaningless.
const raceEnabled = false
