// Package timecheck holds the one rule for the timestamps Kelemetry accepts from its sources:
// CheckTime refuses a time the store cannot represent or one too far ahead of the receiver's
// clock, and the audit helpers (CheckEventTime, FilterEventTimes, SummarizeProblems) apply it to
// an audit event's two timestamps and word the webhook's and the log replay's answers.
package timecheck
