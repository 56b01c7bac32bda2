#!/bin/sh
# ctest examples_refuse_bad_flags: train and charlm (examples/example_flags.h) refuse a
# malformed value, a value that does not fit, a missing value and an unknown option: exit
# status 2, the problem on the first line of stderr, the program's usage after it. Nothing
# here reads a data set: every command line fails before any.
set -eu
train=$1
charlm=$2
status=0
# expect PROGRAM "first line of stderr" ARGS...
expect() {
  program=$1 wanted=$2
  shift 2
  rc=0
  "$program" "$@" 2> "$dir/err" > /dev/null || rc=$?
  got=$(head -n 1 "$dir/err")
  if [ "$rc" != 2 ] || [ "$got" != "$wanted" ] || ! sed -n 2p "$dir/err" | grep -q '^usage: '; then
    echo "FAILED: $(basename "$program") $*: exit $rc, stderr:"
    cat "$dir/err"
    status=1
  fi
}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

expect "$train" "train: --epochs: expected an integer, got 'x'" --epochs x
expect "$train" "train: --epochs: expected an integer, got '2x'" --epochs 2x
expect "$train" "train: --lr: expected a number, got '1e-3q'" --lr 1e-3q
expect "$train" "train: --seed: expected a non-negative integer, got '-1'" --seed -1
expect "$train" "train: --batch-size: 99999999999999999999 is out of range" --batch-size 99999999999999999999
expect "$train" "train: --lr-gamma needs a value" --lr-gamma
expect "$train" "train: unknown option --steps" --steps 3
expect "$train" "train: sizes must be positive" --epochs -1
expect "$train" "train: --resume needs --checkpoint FILE" --resume
expect "$charlm" "charlm: --steps: expected an integer, got 'x'" --steps x
expect "$charlm" "charlm: --temperature: expected a number, got 'warm'" --temperature warm
expect "$charlm" "charlm: --workers: 3000000000 is out of range" --workers 3000000000
expect "$charlm" "charlm: --top-k needs a value" --steps 5 --top-k
expect "$charlm" "charlm: unknown option --epochs" --epochs 2
expect "$charlm" "charlm: --temperature must be positive" --temperature 0
expect "$charlm" "charlm: --ddp and --data-parallel do not go together" --ddp --data-parallel
[ "$status" = 0 ] && echo "train and charlm refuse bad flags"
exit "$status"
