// Command machobind inspects the imports and symbol-pointer tables of Mach-O binaries, runs
// programs under msgtrace, converts their traces and answers questions about them.
//
//	machobind dump [--arch A] [--symbol NAME] [--json] FILE
//	machobind dump --classes [--arch A] [--json] FILE
//	machobind trace TRACE... -o OUT [--format json|perfetto|speedscope|pprof|folded|svg] [filters]
//	machobind run [--out FILE] [--perfetto FILE] [--speedscope FILE] [--pprof FILE] [--folded FILE] [--flame FILE] [filters] -- APP [ARGS...]
//	machobind report [--json] [--budget-ms N] [--top N] [filters] TRACE...
//	machobind diff [--json|--markdown] [--threshold PCT] BASE HEAD
//
// Exit status: 0 on success, 1 when the input cannot be read (one line on stderr), 2 on bad
// usage; run exits with the traced program's status; diff exits 3 when something regressed.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// usageError marks errors that exit with status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// helpRequest is -h / --help given to a command: its usage on stdout, exit status 0.
type helpRequest struct{ fs *flag.FlagSet }

func (h helpRequest) Error() string { return "help requested" }

// command is one of machobind's commands.
type command struct {
	name     string
	synopsis string // the usage lines, without "machobind "
	about    string // what it does, for its --help and the global usage
}

const outputFormats = `output formats, by the output name's extension (or --format for trace):
  .json             json        Chrome trace events: ui.perfetto.dev, chrome://tracing, speedscope
  .pftrace          perfetto    Perfetto protobuf trace: ui.perfetto.dev (the smallest timeline)
  .speedscope.json  speedscope  speedscope's own format: www.speedscope.app (hot methods per thread)
  .pb.gz            pprof       pprof profile: go tool pprof -http=: FILE (calls, self time)
  .folded           folded      folded stacks: flamegraph.pl, inferno, speedscope
  .svg              svg         a flame graph for a browser, per thread, zoom and search
  (.perfetto-trace is perfetto too, .pprof and .pb pprof; any other name is refused)
`

var commands = []command{
	{"dump", "dump [--arch A] [--symbol NAME] [--json] FILE\n       dump --classes [--arch A] [--json] FILE",
		"show a Mach-O file's header, dylibs, segments, fixup style and every symbol-pointer slot\n" +
			"(what rebinding a symbol would touch); --classes: its Objective-C classes, categories and\n" +
			"methods (+load marked) and its Swift types with their vtables"},
	{"trace", "trace TRACE... -o OUT [--format json|perfetto|speedscope|pprof|folded|svg] [--name PROGRAM]\n" +
		"      [--program PATH] [--min-us N] [--max-depth N] [--include PAT]... [--exclude PAT]...\n" +
		"      [--threads all|main|NAME,ID,...]",
		"convert a raw trace dump, or streams (.mtrace; several: one per process, merged onto one\n" +
			"timeline), to one output format (see below); without --format, OUT's extension picks it"},
	{"run", "run [--out trace.json] [--perfetto FILE.pftrace] [--speedscope FILE.speedscope.json]\n" +
		"    [--pprof FILE.pb.gz] [--folded FILE.folded] [--flame FILE.svg] [--streams DIR] [--lib LIB]\n" +
		"    [--top N] [--budget-ms N] [filters as for trace] -- APP [ARGS...]",
		"run APP with the msgtrace library preloaded (LD_PRELOAD / DYLD_INSERT_LIBRARIES), follow\n" +
			"every process it starts, write the trace and summarize it: the methods with the most self\n" +
			"time and the main thread's hitches; exits with APP's status"},
	{"report", "report [--json] [--budget-ms 16] [--top 10] [--idle PAT]... [--no-idle] [--min-us N]\n" +
		"       [--max-depth N] [--include PAT]... [--exclude PAT]... [--threads T] TRACE|DIR...",
		"answer questions about a trace (streams of several processes, a raw dump, or a directory of\n" +
			"streams): hitches (main-thread calls busy past the budget, innermost), per thread the top\n" +
			"methods by self time, total time and calls, the longest calls, losses, calls still running"},
	{"diff", "diff [--json | --markdown] [--threshold 10] [--min-self-ms 1] [--min-calls 100] [--alpha 0.05]\n" +
		"     [--top 20] [--threads T] [--include PAT]... [--exclude PAT]...\n" +
		"     [--pprof-base FILE.pb.gz --pprof-head FILE.pb.gz] BASE HEAD",
		"compare two builds method by method: BASE and HEAD are each a trace, or a directory of runs\n" +
			"(each trace file a run; each subdirectory a run of one or more streams). A method regressed\n" +
			"when its self time (or calls) per run grew beyond noise (Mann-Whitney U over the runs),\n" +
			"by --threshold percent AND by --min-self-ms (--min-calls). Exit status 3 when something\n" +
			"regressed, 0 when nothing did"},
}

func findCommand(name string) *command {
	for i := range commands {
		if commands[i].name == name {
			return &commands[i]
		}
	}
	return nil
}

func globalUsage() string {
	var b strings.Builder
	b.WriteString("usage: machobind <command> [arguments]   (machobind <command> --help: its flags)\n\ncommands:\n")
	for _, c := range commands {
		b.WriteString("  " + strings.ReplaceAll(c.synopsis, "\n", "\n  ") + "\n")
		b.WriteString("        " + strings.ReplaceAll(c.about, "\n", "\n        ") + "\n")
	}
	b.WriteString("\n" + outputFormats)
	b.WriteString("\nexit status: 0 success, 1 the input cannot be read or written, 2 bad usage;\n" +
		"run: the program's status; diff: 3 when something regressed\n")
	return b.String()
}

// commandUsage is a command's --help: synopsis, what it does, its flags.
func commandUsage(fs *flag.FlagSet) string {
	c := findCommand(fs.Name())
	var b strings.Builder
	b.WriteString("usage: machobind " + strings.ReplaceAll(c.synopsis, "\n", "\n"+strings.Repeat(" ", len("usage: machobind "))) + "\n\n" + c.about + "\n\nflags:\n")
	fs.SetOutput(&b)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
	if c.name == "trace" || c.name == "run" {
		b.WriteString("\n" + outputFormats)
	}
	return b.String()
}

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
	var hr helpRequest
	if errors.As(err, &hr) {
		if _, err := io.WriteString(stdout, commandUsage(hr.fs)); err != nil {
			return 1
		}
		return 0
	}
	var ue usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "machobind: %s\n", ue.msg)
		if len(args) > 0 && findCommand(args[0]) != nil {
			c := findCommand(args[0])
			fmt.Fprintf(stderr, "usage: machobind %s\n(machobind %s --help for every flag)\n", strings.ReplaceAll(c.synopsis, "\n", "\n"+strings.Repeat(" ", len("usage: machobind "))), c.name)
		} else {
			io.WriteString(stderr, globalUsage())
		}
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
	case "report":
		return report(args[1:], stdout, stderr)
	case "diff":
		return diff(args[1:], stdout, stderr)
	case "help", "-h", "--help", "-help":
		if len(args) > 1 {
			if findCommand(args[1]) == nil {
				return usageError{fmt.Sprintf("unknown command %q", args[1])}
			}
			return dispatch([]string{args[1], "--help"}, stdout, stderr)
		}
		_, err := io.WriteString(stdout, globalUsage())
		return err
	}
	return usageError{fmt.Sprintf("unknown command %q", args[0])}
}

// newFlags makes a command's flag set: errors are returned, not printed.
func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parseFlags parses flags before the positional arguments (run: APP's arguments follow).
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return helpRequest{fs}
		}
		return usageError{err.Error()}
	}
	return nil
}
