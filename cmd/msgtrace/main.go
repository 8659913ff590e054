// Command msgtrace runs programs under the msgtrace library, converts their traces and
// answers questions about them:
//
//	msgtrace run [--out trace.json] [--perfetto FILE] ... [filters] -- APP [ARGS...]
//	msgtrace trace TRACE... -o OUT [--format FORMAT] [filters] [--json]
//	msgtrace report [--json] [--budget-ms N] [--top N] [filters] TRACE|DIR...
//	msgtrace diff [--json|--markdown] [--threshold PCT] BASE HEAD
//
// machobind run, trace, report and diff are the same commands under their old spellings
// (internal/cli). Exit status: 0 on success, 1 when the input cannot be read (one line on
// stderr), 2 on bad usage; run exits with the traced program's status; diff exits 3 when
// something regressed.
package main

import (
	"os"

	"github.com/msgtrace/msgtrace/internal/cli"
)

var program = cli.Program{Name: "msgtrace", Commands: cli.Tracing}

func main() {
	os.Exit(program.Main(os.Args[1:], os.Stdout, os.Stderr))
}
