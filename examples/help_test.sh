#!/bin/sh
# ctest programs_answer_help (and bench_programs_answer_help): every program given answers
# --help and -h with its usage on stdout, nothing on stderr, exit status 0; and refuses an
# unknown option before doing anything else: "NAME: ..." naming the option on the first
# line of stderr, the usage after it, nothing on stdout, exit status 2.
#   help_test.sh PROGRAM...
#   help_test.sh --google-benchmark PROGRAM...   Google Benchmark's own answers: its help
#                                                 (exit 0); "unrecognized command-line flag"
#                                                 (exit 1), as BENCHMARK_MAIN gives them
set -eu
google=0
if [ "${1:-}" = --google-benchmark ]; then
  google=1
  shift
fi
status=0
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() {
  echo "FAILED: $*"
  echo "stdout:"; cat "$dir/out"
  echo "stderr:"; cat "$dir/err"
  status=1
}
# run PROGRAM ARGS...: sets rc; output in $dir/out and $dir/err
run() {
  rc=0
  "$@" > "$dir/out" 2> "$dir/err" < /dev/null || rc=$?
}
bogus=--no-such-option
for program in "$@"; do
  name=$(basename "$program")
  if [ "$google" = 1 ]; then
    run "$program" --help
    [ "$rc" = 0 ] && [ -s "$dir/out" ] || fail "$name --help: exit $rc"
    run "$program" "$bogus"
    [ "$rc" = 1 ] && grep -q "unrecognized command-line flag: $bogus" "$dir/err" && [ ! -s "$dir/out" ] ||
      fail "$name $bogus: exit $rc"
    continue
  fi
  for help in --help -h; do
    run "$program" "$help"
    if [ "$rc" != 0 ] || ! head -n 1 "$dir/out" | grep -q "^usage: $name" || [ -s "$dir/err" ]; then
      fail "$name $help: exit $rc"
    fi
  done
  run "$program" "$bogus"
  first=$(head -n 1 "$dir/err")
  case "$first" in
    "$name: "*"$bogus"*) named=1 ;;
    *) named=0 ;;
  esac
  if [ "$rc" != 2 ] || [ "$named" != 1 ] || ! grep -q "^usage: $name" "$dir/err" || [ -s "$dir/out" ]; then
    fail "$name $bogus: exit $rc"
  fi
done
[ "$status" = 0 ] && echo "$# programs answer --help and -h and refuse $bogus"
exit "$status"
