#!/bin/sh
# ctest charlm_refuses_batch_larger_than_corpus: on a corpus with fewer training windows
# than --batch-size, charlm (whose loader drops the short last batch) has no step to take:
# it refuses at once, naming both numbers, exit status 2, where it used to loop over empty
# epochs forever. A batch of exactly every window trains. The corpus is made here.
set -eu
charlm=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir "$dir/corpus"
# 10 files (the tenth is held out for validation) of "cookie N\n%\n", 11 characters each:
# 9 * 11 = 99 training characters, 91 windows of --context 8.
for i in 0 1 2 3 4 5 6 7 8 9; do printf 'cookie %s\n%%\n' "$i" > "$dir/corpus/c$i"; done
run() {
  timeout 120 "$charlm" --disable-cuda --data "$dir/corpus" --steps 2 --context 8 --width 16 --layers 1 --heads 2 \
    --eval-batches 1 --samples 0 "$@"
}
rc=0
run --batch-size 92 > "$dir/out" 2> "$dir/err" || rc=$?
wanted="charlm: --batch-size 92 is more than the 91 training windows (99 characters, --context 8): not one full batch to train on"
if [ "$rc" != 2 ] || [ "$(head -n 1 "$dir/err")" != "$wanted" ] || ! sed -n 2p "$dir/err" | grep -q '^usage: charlm'; then
  echo "FAILED: charlm --batch-size 92: exit $rc (124: it never ended), stderr:"
  cat "$dir/err"
  exit 1
fi
run --batch-size 91 > "$dir/out"
grep -q '^step 2/2 ' "$dir/out" || { echo "FAILED: --batch-size 91 did not train:"; cat "$dir/out"; exit 1; }
echo "charlm refuses a batch larger than its training windows"
