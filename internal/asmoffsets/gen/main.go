// Command gen writes asm_offsets.h (see package asmoffsets): `go generate` runs it in the
// repository root.
//
//	go run ./internal/asmoffsets/gen [-root dir] [-o file]
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/msgtrace/msgtrace/internal/asmoffsets"
)

func main() {
	root := flag.String("root", ".", "the directory with rt.h and trampoline.h")
	out := flag.String("o", "", "the header to write (default: asm_offsets.h in -root)")
	flag.Parse()
	if *out == "" {
		*out = filepath.Join(*root, "asm_offsets.h")
	}
	hdr, measured, err := asmoffsets.Generate(*root, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "asmoffsets:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(*out, hdr, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "asmoffsets:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "asmoffsets: %s, the same on %s\n", *out, strings.Join(measured, ", "))
}
