// Command machobind inspects the imports and symbol-pointer tables of Mach-O binaries and
// converts msgtrace's raw traces.
//
//	machobind dump [--arch A] [--symbol NAME] [--json] FILE
//	machobind trace RAW|STREAM... -o OUT [--format json|pprof|folded|svg] [filters]
//	machobind run [--out FILE] [--pprof FILE] [--folded FILE] [filters] -- APP [ARGS...]
//
// Exit status: 0 on success, 1 when the input cannot be read (one line on stderr), 2 on bad
// usage; run exits with the traced program's status.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// usageError marks errors that exit with status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

const usage = `usage: machobind <command> [arguments]

commands:
  dump [--arch A] [--symbol NAME] [--json] FILE
        show a Mach-O file's header, dylibs, segments, fixup style and every
        symbol-pointer slot (what rebinding a symbol would touch)
  trace RAW|STREAM... -o OUT [--format json|pprof|folded|svg] [--min-us N] [--max-depth N]
        [--include PAT]... [--exclude PAT]... [--threads all|main|NAME,ID,...]
        convert a raw trace dump, or streams (several: one per process, merged onto one
        timeline), to Chrome trace JSON (Perfetto), pprof, folded stacks or an SVG flame graph
  run [--out trace.json] [--pprof FILE] [--folded FILE] [--flame FILE.svg] [--streams DIR] [--lib LIB]
        [--top N] [filters as for trace] -- APP [ARGS...]
        run APP with the msgtrace library preloaded (LD_PRELOAD / DYLD_INSERT_LIBRARIES),
        write its trace and list the methods with the most self time
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes one command line and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	err := dispatch(args, stdout, stderr)
	if err == nil {
		return 0
	}
	var es exitStatus
	if errors.As(err, &es) {
		return int(es)
	}
	var ue usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "machobind: %s\n%s", ue.msg, usage)
		return 2
	}
	fmt.Fprintf(stderr, "machobind: %v\n", err)
	return 1
}

func dispatch(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError{"no command given"}
	}
	switch args[0] {
	case "dump":
		return dump(args[1:], stdout)
	case "trace":
		return trace(args[1:], stdout, stderr)
	case "run":
		return runTraced(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		_, err := io.WriteString(stdout, usage)
		return err
	}
	return usageError{fmt.Sprintf("unknown command %q", args[0])}
}
