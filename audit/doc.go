// Package audit is the audit pipeline from kube-apiserver to the aggregator: its configuration
// (Config) and its wiring (New, Module). The parts live in one package each, in the order the
// data flows:
//
//   - auditv1: the audit.k8s.io/v1 wire format, its decoder and the partition key;
//   - webhook: kube-apiserver's audit webhook backend; tap: the dump and forwarders it feeds;
//   - auditlog: replay and follow of audit log files;
//   - queue: memory, durable or NATS queue between the receivers and the consumer;
//   - consumer: audit events to aggregator events (diffs, deletecollection, informer join).
//
// New builds them from Config and Deps into a Pipeline, giving each part its dependencies at
// construction; Pipeline.Start and Stop run the parts' Start and Stop in order (Module registers
// them with the fx lifecycle). Observe shows every accepted batch to Observers (kelemetrix is
// one). Package audittest replays recorded audit logs through a consumer and an aggregator for
// tests.
package audit
