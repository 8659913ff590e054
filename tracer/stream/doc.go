// Package stream is the tracer's input formats, as bytes: the stream the library's drain
// writes (stream.go documents it; stream_format.go holds its numbers, generated from
// internal/streamspec with the C encoder's stream_format.h), its frame payloads' decoding
// (stream_decode.go), the reference encoder (StreamWriter, stream_write.go), and the raw dump
// of the earlier format, one buffer per thread (raw.go, rawwrite.go). Header, Thread, Mark and
// Instant are what both formats say about a process, a thread, a loss and a moment.
//
// Reading a stream in call order is the engine's job (tracer/engine); this package knows
// nothing of calls beyond their records.
package stream
