#!/bin/sh
# ctest charlm_resume_continues_the_run: a small charlm run of 6 steps, and the same run
# stopped after step 3 with a checkpoint and resumed: steps 4-6 print the same training loss,
# validation loss and learning rate (model, AdamW, the warmup + cosine schedule and the data
# order all restored); again with dropout 0.1, which matches only because the checkpoint
# restores the generators' states too (a reseeded generator draws other masks); and again
# with --amp on an emulated cuda device: float16 under autocast with a GradScaler, whose
# scale backs off from 65536 in the first steps (the scaled float16 gradients overflow), so
# the resumed steps match only when the checkpoint restored the scaler too. Exit 77 (skipped) without Debian's fortunes.
set -eu
charlm=$1
data=/usr/share/games/fortunes
[ -d "$data" ] || { echo "no fortunes in $data: skipped"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
base() {
  "$charlm" --steps 6 --warmup 2 --log-every 1 --batch-size 4 --context 16 --width 16 --layers 1 \
    --heads 2 --dropout 0 --eval-batches 2 --samples 0 "$@"
}
run() { base --disable-cuda "$@"; }
# "step 4/6  loss 4.1234  val 4.2345  lr 0.001  1234 tokens/s" without the throughput
fields() { sed -n 's/^\(step [0-9]*\/6  loss [0-9.]*  val [0-9.]*  lr [0-9.e-]*\) .*/\1/p' "$1"; }

run > "$dir/whole.txt"
run --checkpoint "$dir/ck.safetensors" --stop-after 3 > "$dir/first.txt"
run --checkpoint "$dir/ck.safetensors" --resume | tee "$dir/resumed.txt"
grep -q '^resumed from .* after step 3$' "$dir/resumed.txt"
fields "$dir/whole.txt" | tail -n 3 > "$dir/expected"
fields "$dir/resumed.txt" > "$dir/got"
[ "$(wc -l < "$dir/got")" -eq 3 ] || { echo "expected 3 progress lines after resuming"; exit 1; }
diff "$dir/expected" "$dir/got"
fields "$dir/whole.txt" | head -n 3 > "$dir/expected_first"
fields "$dir/first.txt" > "$dir/got_first"
diff "$dir/expected_first" "$dir/got_first"

# With dropout: the same, the masks coming from the restored generator states.
run --dropout 0.1 > "$dir/drop_whole.txt"
run --dropout 0.1 --checkpoint "$dir/drop.safetensors" --stop-after 3 > /dev/null
run --dropout 0.1 --checkpoint "$dir/drop.safetensors" --resume > "$dir/drop_resumed.txt"
fields "$dir/drop_whole.txt" | tail -n 3 > "$dir/drop_expected"
fields "$dir/drop_resumed.txt" > "$dir/drop_got"
[ "$(wc -l < "$dir/drop_got")" -eq 3 ] || { echo "expected 3 progress lines after resuming with dropout"; exit 1; }
diff "$dir/drop_expected" "$dir/drop_got"

amp() { EMBER_EMULATED_DEVICES=1 base --device cuda:0 --amp "$@"; }
amp > "$dir/amp_whole.txt"
grep -q 'mixed precision (float16, loss scaling)' "$dir/amp_whole.txt"
amp --checkpoint "$dir/amp.safetensors" --stop-after 3 > /dev/null
amp --checkpoint "$dir/amp.safetensors" --resume > "$dir/amp_resumed.txt"
fields "$dir/amp_whole.txt" | tail -n 3 > "$dir/amp_expected"
fields "$dir/amp_resumed.txt" > "$dir/amp_got"
[ "$(wc -l < "$dir/amp_got")" -eq 3 ] || { echo "expected 3 progress lines after resuming with --amp"; exit 1; }
diff "$dir/amp_expected" "$dir/amp_got"
echo "charlm --resume continued the run, with dropout and with --amp"
