// Command machobind inspects the imports and symbol-pointer tables of Mach-O binaries:
//
//	machobind dump [--arch A] [--symbol NAME] [--json] FILE
//	machobind dump --classes [--arch A] [--json] FILE
//
// It also runs the tracing commands under their old spellings (machobind run, trace, report,
// diff: the msgtrace command's, internal/cli).
//
// Exit status: 0 on success, 1 when the input cannot be read (one line on stderr), 2 on bad
// usage; run exits with the traced program's status; diff exits 3 when something regressed.
package main

import (
	"flag"
	"io"
	"os"

	"github.com/msgtrace/msgtrace/internal/cli"
)

// usageError marks errors that exit with status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// Usage makes it a usage error for cli.
func (e usageError) Usage() string { return e.msg }

var dumpCommand = cli.Command{Name: "dump", Synopsis: "dump [--arch A] [--symbol NAME] [--json] FILE\n       dump --classes [--arch A] [--json] FILE",
	About: "show a Mach-O file's header, dylibs, segments, fixup style and every symbol-pointer slot\n" +
		"(what rebinding a symbol would touch); --classes: its Objective-C classes, categories and\n" +
		"methods (+load marked) and its Swift types with their vtables",
	Run: func(s *cli.Session, args []string) error { return dump(args, s.Stdout) }}

// program is machobind: dump, and the tracing commands under their old spellings.
var program = cli.Program{Name: "machobind",
	About:    "(run, trace, report and diff are the msgtrace command's, spelled here as before)",
	Commands: append([]cli.Command{dumpCommand}, cli.Tracing...)}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes one command line and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	return program.Main(args, stdout, stderr)
}

// newFlags makes a command's flag set: errors are returned, not printed.
func newFlags(name string) *flag.FlagSet { return cli.NewFlags(name) }

// parseFlags parses flags before the positional arguments.
func parseFlags(fs *flag.FlagSet, args []string) error { return cli.ParseFlags(fs, args) }
