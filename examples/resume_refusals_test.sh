#!/bin/sh
# ctest examples_refuse_foreign_checkpoints: train --resume and charlm --resume given a
# checkpoint of the other program, of another model, or with its metadata missing or
# edited (examples/example_checkpoint.h) end with a message naming the file on the first
# line of stderr and exit status 1, never std::terminate (exit 134); a checkpoint after
# epoch 2147483647 resumes at epoch 2147483648, not -2147483648. charlm reads a tiny corpus
# made here; train's cases that need its tensors read a slice of Fashion-MNIST and are left
# out without it (the rest still run).
set -eu
train=$1
charlm=$2
here=$(dirname "$0")
status=0
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# expect PROGRAM "first line of stderr" ARGS...
expect() {
  program=$1 wanted=$2
  shift 2
  rc=0
  "$program" --disable-cuda "$@" > "$dir/out" 2> "$dir/err" || rc=$?
  got=$(head -n 1 "$dir/err")
  case "$got" in
    "$wanted"*) matched=1 ;;
    *) matched=0 ;;
  esac
  if [ "$rc" != 1 ] || [ "$matched" != 1 ]; then
    echo "FAILED: $(basename "$program") $*: exit $rc (wanted 1 and '$wanted...'), stderr:"
    cat "$dir/err"
    status=1
  fi
}
meta() { "$here/checkpoint_metadata.py" "$@"; }

# Metadata alone: refused before any data or tensor is read.
ck=$dir/ck.safetensors
meta - "$ck"
expect "$train" "train: $ck has no 'epoch' in its metadata: it is not a checkpoint of this program" \
  --checkpoint "$ck" --resume
for bad in abc " 12" ""; do
  meta - "$ck" "epoch=$bad"
  expect "$train" "train: $ck: metadata epoch='$bad' is not an integer" --checkpoint "$ck" --resume
done
for big in 99999999999 2147483648 -1; do
  meta - "$ck" "epoch=$big"
  expect "$train" "train: $ck: metadata epoch='$big' is out of range [0, 2147483647]" --checkpoint "$ck" --resume
done
meta - "$ck" epoch=1  # train's metadata
expect "$charlm" "charlm: $ck has no 'step' in its metadata: it is not a checkpoint of this program" \
  --checkpoint "$ck" --resume
for big in -3 99999999999999999999; do
  meta - "$ck" "step=$big"
  expect "$charlm" "charlm: $ck: metadata step='$big' is out of range [0, 9223372036854775807]" --checkpoint "$ck" --resume
done
meta - "$ck" step=x3
expect "$charlm" "charlm: $ck: metadata step='x3' is not an integer" --checkpoint "$ck" --resume

# charlm's own checkpoint, on a tiny corpus: another model, no vocabulary, a bad step.
mkdir "$dir/corpus"
for i in 0 1 2 3 4 5 6 7 8 9; do printf 'A tiny cookie, number %s.\n%%\nAnd another.\n' "$i" > "$dir/corpus/c$i"; done
small() {
  "$charlm" --disable-cuda --data "$dir/corpus" --steps 2 --batch-size 2 --context 8 --width 16 --layers 1 --heads 2 \
    --eval-batches 1 --samples 0 "$@"
}
lm=$dir/lm.safetensors
small --checkpoint "$lm" > /dev/null
small --checkpoint "$lm" --resume --steps 3 > /dev/null  # it resumes
cp "$lm" "$dir/lm-original.safetensors"
expect "$charlm" "charlm: $lm: its model state does not fit this run (--context, --width, --layers and --heads as it was saved with): Error(s) in loading state_dict for CharLM:" \
  --data "$dir/corpus" --steps 3 --batch-size 2 --context 8 --width 32 --layers 1 --heads 2 --checkpoint "$lm" --resume
meta "$dir/lm-original.safetensors" "$lm" step=1e3
expect "$charlm" "charlm: $lm: metadata step='1e3' is not an integer" --data "$dir/corpus" --checkpoint "$lm" --resume
meta - "$ck" step=1  # charlm's metadata, no tensor
expect "$charlm" "charlm: $ck has no vocabulary.chars: it is not a checkpoint of charlm" \
  --data "$dir/corpus" --checkpoint "$ck" --resume
# charlm's tensors with train's metadata: train refuses them as another model (needs its data).
meta "$dir/lm-original.safetensors" "$dir/lm-as-train.safetensors" epoch=1

data=/usr/share/datasets/fashion-mnist
if [ -f "$data/train-images-idx3-ubyte.gz" ]; then
  "$here/../scripts/slice-fashion-mnist" "$data" "$dir/data" 64 64 1
  run() { "$train" --data "$dir/data" --limit 1 --eval-limit 1 --workers 0 --epochs 1 "$@"; }
  expect "$train" "train: $dir/lm-as-train.safetensors: its model state does not fit this run (train's network): Error(s) in loading state_dict for FashionCnn:" \
    --data "$dir/data" --checkpoint "$dir/lm-as-train.safetensors" --resume
  tk=$dir/train.safetensors
  run --disable-cuda --checkpoint "$tk" > /dev/null
  expect "$charlm" "charlm: $tk has no 'step' in its metadata: it is not a checkpoint of this program" \
    --data "$dir/corpus" --checkpoint "$tk" --resume
  meta "$tk" "$dir/edited.safetensors"
  expect "$train" "train: $dir/edited.safetensors has no 'epoch' in its metadata: it is not a checkpoint of this program" \
    --data "$dir/data" --checkpoint "$dir/edited.safetensors" --resume
  meta "$tk" "$dir/edited.safetensors" epoch=abc
  expect "$train" "train: $dir/edited.safetensors: metadata epoch='abc' is not an integer" \
    --data "$dir/data" --checkpoint "$dir/edited.safetensors" --resume
  meta "$tk" "$dir/last.safetensors" epoch=2147483647
  run --disable-cuda --checkpoint "$dir/last.safetensors" --resume > "$dir/last.txt"
  if ! grep -q "after epoch 2147483647$" "$dir/last.txt" || ! grep -q "^epoch 2147483648 " "$dir/last.txt"; then
    echo "FAILED: train resumed after epoch 2147483647:"
    cat "$dir/last.txt"
    status=1
  fi
else
  echo "no Fashion-MNIST in $data: train's cases with tensors left out"
fi
[ "$status" = 0 ] && echo "train and charlm refuse foreign checkpoints"
exit "$status"
