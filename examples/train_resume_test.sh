#!/bin/sh
# ctest train_resume_restores_schedule: `train --lr-step 2 --lr-gamma 0.5` for 3 epochs with
# a checkpoint, then --resume for 2 more: the resumed epochs go on with the schedule
# (StepLR from lr 0.001: epochs 1-2 0.001, 3-4 0.0005, 5 0.00025), where a restarted
# schedule would keep 0.0005 for epoch 5. A checkpoint made without --lr-step (without
# "scheduler." keys) still resumes, with the schedule started afresh. A run of 2 epochs and
# the same run stopped after epoch 1 and resumed print the same epoch 2 (loss and test
# accuracy): the checkpoint restores dropout's and the shuffling's generators too. The runs read a
# 256-image slice of the dataset (scripts/slice-fashion-mnist): loading all 70,000 images
# four times was most of the test's time. Exit 77 (skipped) without the Fashion-MNIST files.
set -eu
train=$1
data=/usr/share/datasets/fashion-mnist
[ -f "$data/train-images-idx3-ubyte.gz" ] || { echo "no Fashion-MNIST in $data: skipped"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$(dirname "$0")/../scripts/slice-fashion-mnist" "$data" "$dir/data" 256 256 1
run() { "$train" --disable-cuda --data "$dir/data" --limit 2 --eval-limit 2 --workers 0 "$@"; }

run --epochs 3 --lr-step 2 --lr-gamma 0.5 --checkpoint "$dir/ck.safetensors" | tee "$dir/first.txt"
run --epochs 2 --lr-step 2 --lr-gamma 0.5 --checkpoint "$dir/ck.safetensors" --resume | tee "$dir/resumed.txt"
grep -q '^epoch 3 .*  lr 0.0005$' "$dir/first.txt"
grep -q '^epoch 4 .*  lr 0.0005$' "$dir/resumed.txt"
grep -q '^epoch 5 .*  lr 0.00025$' "$dir/resumed.txt"

run --epochs 1 --checkpoint "$dir/old.safetensors" > /dev/null
run --epochs 1 --lr-step 2 --checkpoint "$dir/old.safetensors" --resume | tee "$dir/old.txt"
grep -q 'no scheduler state in it' "$dir/old.txt"
grep -q '^epoch 2 .*  lr 0.001$' "$dir/old.txt"
# The uninterrupted run's epoch 2 and the resumed one's: dropout's masks and the data order too.
epoch2() { sed -n 's/^\(epoch 2  loss [0-9.]*  test accuracy [0-9.]*%\).*/\1/p' "$1"; }
run --epochs 2 > "$dir/whole.txt"
run --epochs 1 --checkpoint "$dir/gen.safetensors" > /dev/null
run --epochs 1 --checkpoint "$dir/gen.safetensors" --resume > "$dir/gen_resumed.txt"
[ -n "$(epoch2 "$dir/whole.txt")" ] || { echo "no epoch 2 line"; exit 1; }
[ "$(epoch2 "$dir/whole.txt")" = "$(epoch2 "$dir/gen_resumed.txt")" ] ||
  { echo "the resumed epoch 2 differs:"; epoch2 "$dir/whole.txt"; epoch2 "$dir/gen_resumed.txt"; exit 1; }
echo "train --resume restored the schedule and the generators"
