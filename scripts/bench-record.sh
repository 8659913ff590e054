# Sourced by the benchmark scripts (scripts/bench-*.sh): their figures as dated records.
#
#	bench_record NAME "VARS" "$0" "$@"
#
# at the top of a benchmark runs the script again with its standard output shown and kept; when
# it succeeds (exit status 0, or 3: the figures show what the benchmark guards against, a run
# worth keeping), appends a record to docs/bench/NAME.md: the UTC date, the tree
# (`git describe --always`, "-dirty" when a tracked file outside docs/ differs), the
# command (the script, its arguments and those of VARS that are set), the machine (CPU model,
# cores, kernel, load average at the start and at the end), the wall time, then what the script
# printed. The script's exit status is the run's. In the run itself (BENCH_RECORDING=1) it
# returns at once. BENCH_RECORD=0: no record.
bench_record() {
	local name=$1 vars=$2 script=$3
	shift 3
	[ -z "${BENCH_RECORDING:-}" ] || return 0
	local root
	root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
	if [ "${BENCH_RECORD:-1}" = 0 ]; then
		BENCH_RECORDING=1 bash "$script" "$@"
		exit
	fi
	local file=$root/docs/bench/$name.md
	local tmp start load0 t0 status=0 tree cmd v
	tmp=$(mktemp)
	start=$(date -u '+%Y-%m-%d %H:%M UTC')
	load0=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || true)
	tree=$(git -C "$root" describe --always 2>/dev/null || echo unknown)
	if [ -n "$(git -C "$root" status --porcelain --untracked-files=no -- . ':(exclude)docs' 2>/dev/null)" ]; then
		tree+=-dirty
	fi
	cmd="scripts/$(basename "$script")"
	for v in "$@"; do cmd+=" $v"; done
	for v in $vars; do
		[ -z "${!v+x}" ] || cmd="$v=${!v} $cmd"
	done
	t0=$SECONDS
	BENCH_RECORDING=1 bash "$script" "$@" | tee "$tmp" || status=$?
	if { [ "$status" = 0 ] || [ "$status" = 3 ]; } && [ -s "$tmp" ]; then
		local cpu cores kernel load1
		cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -1)
		[ -n "$cpu" ] || cpu=$(uname -m)
		cores=$(nproc 2>/dev/null || echo '?')
		kernel="$(uname -s) $(uname -r)"
		load1=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || true)
		mkdir -p "$(dirname "$file")"
		[ -s "$file" ] || printf '# Benchmark records: %s\n\nWhat `%s` printed, a record a run, oldest first, appended by the script\n(scripts/bench-record.sh); its head comment says what it measures.\n' "$name" "scripts/$(basename "$script")" >"$file"
		{
			printf '\n## %s · %s\n\n' "$start" "$tree"
			printf -- '- command: `%s`\n' "$cmd"
			printf -- '- machine: %s, %s cores, %s; load average %s at the start, %s at the end\n' "$cpu" "$cores" "$kernel" "$load0" "$load1"
			printf -- '- wall time: %d s\n\n' "$((SECONDS - t0))"
			printf '```text\n'
			cat "$tmp"
			printf '```\n'
		} >>"$file"
		echo "bench: recorded in ${file#"$root"/}" >&2
	fi
	rm -f "$tmp"
	exit "$status"
}
