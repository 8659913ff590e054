// Package cli is the tracing commands (run, trace, report, diff) that the msgtrace command
// runs, and machobind too under its old spellings, with the command-line frame both share:
// usage and help text, flag parsing, exit statuses.
//
// Exit status: 0 on success, 1 when the input cannot be read (one line on stderr), 2 on bad
// usage; run exits with the traced program's status; diff exits 3 when something regressed.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/msgtrace/msgtrace/tracer"
)

// Session is one command line being run: the program's name (for messages and usage lines)
// and where it writes.
type Session struct {
	Prog           string
	Stdout, Stderr io.Writer
}

// Command is one command of a program.
type Command struct {
	Name     string
	Synopsis string // the usage lines, without the program's name
	About    string // what it does, for its --help and the global usage
	Formats  bool   // its --help lists the output formats
	Run      func(s *Session, args []string) error
}

// Tracing are the tracing commands: msgtrace's, and machobind's old spellings.
var Tracing = []Command{
	{"trace", "trace TRACE... -o OUT [--format " + strings.Join(tracer.Formats, "|") + "] [--name PROGRAM]\n" +
		"      [--program PATH] [--min-us N] [--max-depth N] [--include PAT]... [--exclude PAT]...\n" +
		"      [--threads all|main|NAME,ID,...] [--json]",
		"convert a raw trace dump, or streams (.mtrace; several: one per process, merged onto one\n" +
			"timeline), to one output format (see below); without --format, OUT's extension picks it;\n" +
			"then say what it wrote (calls, kept, folded, files) on stderr, or as JSON on stdout (--json)",
		true, (*Session).trace},
	{"run", "run [--out trace.json] " + runFlagsSynopsis() + " [--streams DIR] [--lib LIB]\n" +
		"    [--report FILE.json] [--top N] [--budget-ms N] [filters as for trace] -- APP [ARGS...]",
		"run APP with the msgtrace library preloaded (LD_PRELOAD / DYLD_INSERT_LIBRARIES), follow\n" +
			"every process it starts, write the trace and summarize it: the methods with the most self\n" +
			"time and the main thread's hitches; exits with APP's status",
		true, (*Session).runTraced},
	{"report", "report [--json] [--budget-ms 16] [--top 10] [--idle PAT]... [--no-idle] [--min-us N]\n" +
		"       [--max-depth N] [--include PAT]... [--exclude PAT]... [--threads T] TRACE|DIR...",
		"answer questions about a trace (streams of several processes, a raw dump, or a directory of\n" +
			"streams): the launch, hitches (main-thread calls busy past the budget, innermost), per thread\n" +
			"the top methods by self time, total time and calls, the longest calls, losses, calls still\n" +
			"running; every list at most --top long, with its totals (--json: the launch lists whole)",
		false, (*Session).report},
	{"diff", "diff [--json | --markdown] [--threshold 10] [--min-self-ms 1] [--min-calls 100] [--alpha 0.05]\n" +
		"     [--top 20] [--threads T] [--include PAT]... [--exclude PAT]...\n" +
		"     [--pprof-base FILE.pb.gz --pprof-head FILE.pb.gz] BASE HEAD",
		"compare two builds method by method: BASE and HEAD are each a trace, or a directory of runs\n" +
			"(each trace file a run; each subdirectory a run of one or more streams). A method regressed\n" +
			"when its self time (or calls) per run grew beyond noise (Mann-Whitney U over the runs),\n" +
			"by --threshold percent AND by --min-self-ms (--min-calls). Exit status 3 when something\n" +
			"regressed, 0 when nothing did",
		false, (*Session).diff},
}

// runFlagsSynopsis is run's extra-output flags, from the format registry.
func runFlagsSynopsis() string {
	var b strings.Builder
	n := 0
	for _, f := range tracer.Registry {
		if f.RunFlag == "" {
			continue
		}
		switch {
		case n == 2: // two on the first line, after --out
			b.WriteString("\n    ")
		case n > 0:
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "[--%s FILE%s]", f.RunFlag, f.Extensions[0])
		n++
	}
	return b.String()
}

// formatsHelp is the help text's list of output formats.
func formatsHelp() string {
	return "output formats, by the output name's extension (or --format for trace):\n" + tracer.FormatsHelp()
}

// UsageError is bad usage: its message, the command's synopsis, exit status 2. Any error with
// a Usage method is taken as one.
type UsageError struct{ Msg string }

func (e UsageError) Error() string { return e.Msg }

// Usage returns the message.
func (e UsageError) Usage() string { return e.Msg }

func usageError(msg string) error { return UsageError{msg} }

// HelpRequest is -h / --help given to a command: its usage on stdout, exit status 0.
type HelpRequest struct{ FS *flag.FlagSet }

func (h HelpRequest) Error() string { return "help requested" }

// ExitStatus ends the program with this status, printing nothing more (run: the traced
// program's status; diff: 3 when something regressed).
type ExitStatus int

func (e ExitStatus) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// NewFlags makes a command's flag set: errors are returned, not printed.
func NewFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// ParseFlags parses flags before the positional arguments (run: APP's arguments follow).
func ParseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return HelpRequest{fs}
		}
		return UsageError{err.Error()}
	}
	return nil
}

// ParseInterleaved parses flags that may come before or after the positional arguments.
func ParseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := ParseFlags(fs, args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// Program is a command with its commands.
type Program struct {
	Name     string
	About    string // one line under the usage line
	Commands []Command
}

func (p *Program) find(name string) *Command {
	for i := range p.Commands {
		if p.Commands[i].Name == name {
			return &p.Commands[i]
		}
	}
	return nil
}

func (p *Program) usage() string {
	var b strings.Builder
	fmt.Fprintf(&b, "usage: %s <command> [arguments]   (%s <command> --help: its flags)\n", p.Name, p.Name)
	if p.About != "" {
		b.WriteString(p.About + "\n")
	}
	b.WriteString("\ncommands:\n")
	formats := false
	for _, c := range p.Commands {
		b.WriteString("  " + strings.ReplaceAll(c.Synopsis, "\n", "\n  ") + "\n")
		b.WriteString("        " + strings.ReplaceAll(c.About, "\n", "\n        ") + "\n")
		formats = formats || c.Formats
	}
	if formats {
		b.WriteString("\n" + formatsHelp())
	}
	b.WriteString("\nexit status: 0 success, 1 the input cannot be read or written, 2 bad usage")
	if p.find("run") != nil {
		b.WriteString(";\nrun: the program's status; diff: 3 when something regressed")
	}
	b.WriteString("\n")
	return b.String()
}

// synopsis is a command's usage lines, indented under "usage: PROG ".
func (p *Program) synopsis(c *Command) string {
	lead := "usage: " + p.Name + " "
	return lead + strings.ReplaceAll(c.Synopsis, "\n", "\n"+strings.Repeat(" ", len(lead)))
}

// commandUsage is a command's --help: synopsis, what it does, its flags.
func (p *Program) commandUsage(fs *flag.FlagSet) string {
	c := p.find(fs.Name())
	var b strings.Builder
	b.WriteString(p.synopsis(c) + "\n\n" + c.About + "\n\nflags:\n")
	fs.SetOutput(&b)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
	if c.Formats {
		b.WriteString("\n" + formatsHelp())
	}
	return b.String()
}

// Main executes one command line and returns the exit status.
func (p *Program) Main(args []string, stdout, stderr io.Writer) int {
	err := p.dispatch(args, &Session{p.Name, stdout, stderr})
	if err == nil {
		return 0
	}
	var es ExitStatus
	if errors.As(err, &es) {
		return int(es)
	}
	var hr HelpRequest
	if errors.As(err, &hr) {
		if _, err := io.WriteString(stdout, p.commandUsage(hr.FS)); err != nil {
			return 1
		}
		return 0
	}
	var ue interface{ Usage() string }
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "%s: %s\n", p.Name, ue.Usage())
		if len(args) > 0 && p.find(args[0]) != nil {
			c := p.find(args[0])
			fmt.Fprintf(stderr, "%s\n(%s %s --help for every flag)\n", p.synopsis(c), p.Name, c.Name)
		} else {
			io.WriteString(stderr, p.usage())
		}
		return 2
	}
	fmt.Fprintf(stderr, "%s: %v\n", p.Name, err)
	return 1
}

func (p *Program) dispatch(args []string, s *Session) error {
	if len(args) == 0 {
		return UsageError{"no command given"}
	}
	if c := p.find(args[0]); c != nil {
		return c.Run(s, args[1:])
	}
	switch args[0] {
	case "help", "-h", "--help", "-help":
		if len(args) > 1 {
			if p.find(args[1]) == nil {
				return UsageError{fmt.Sprintf("unknown command %q", args[1])}
			}
			return p.dispatch([]string{args[1], "--help"}, s)
		}
		_, err := io.WriteString(s.Stdout, p.usage())
		return err
	}
	return UsageError{fmt.Sprintf("unknown command %q", args[0])}
}
