// Package tracetest holds what the tracer's packages' tests share: generated streams (Gen,
// Runloop, WriteThreads, FuzzStream), a TreeSink that records what it is told (RecTree), a
// sink that hides an aggregate's trie (GenericSink). Tests only: no product code imports it,
// and it imports no package whose tests use it but engine, sink and stream.
package tracetest
