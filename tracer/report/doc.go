// Package report is what a trace says rather than draws: the report (report.go: hitches on
// main threads, per-thread hot methods, the longest, open and unwound calls, losses; with
// report_launch.go's launches), and comparisons of runs (diff.go: per-method profiles of
// several runs of a base and a head compared; diffstat.go: the Mann-Whitney U test and Holm's
// correction it uses). Both are engine sinks taking calls in pre-order.
package report
