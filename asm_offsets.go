package msgtrace

// asm_offsets.h holds the offsets of the C structs the assembly reads and writes, measured by
// the C compiler from their definitions in rt.h and trampoline.h (internal/asmoffsets).
//go:generate go run ./internal/asmoffsets/gen
