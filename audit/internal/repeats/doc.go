// Package repeats remembers the audit events and bodies seen lately (a two-generation hash set,
// about 25 bytes an event), so that the webhook and the consumer can leave out a repeated
// delivery.
package repeats
