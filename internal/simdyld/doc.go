// Package simdyld is a simulated dyld for tests: it maps a real Mach-O file's segments into
// this (Linux) process at a non-zero slide, applies its rebases and binds — classic dyld-info
// opcodes (including threaded binds) and chained fixups — with a unique fake address per
// imported symbol, and protects the segments as dyld leaves them (__DATA_CONST read-only).
// Rebinding code then runs over the mapping exactly as it runs over an image dyld loaded.
//
// Load commands, rebases, binds and chains are all decoded here (with go-macho's types for
// the constants), apart from the production parser, so that tests compare two independent
// readings; go-macho's File is not used, as it trusts sizes in the file and can exhaust
// memory on a corrupted one. The loader itself is Linux-only (mmap placement,
// /proc/self/maps).
package simdyld
