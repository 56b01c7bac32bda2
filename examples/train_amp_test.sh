#!/bin/sh
# ctest train_amp_trains_and_resumes: `train --amp` on an emulated cuda device (float16 under
# autocast, the loss scaled by a GradScaler) trains a few batches to a finite loss and saves
# the scaler's state under "scaler." in its checkpoint; --resume restores it; on the cpu
# --amp runs bfloat16 without a scaler (no "scaler." keys); with --cuda-graphs the whole
# mixed-precision step is captured and replayed, to a finite loss. Reads a 256-image slice of
# Fashion-MNIST (scripts/slice-fashion-mnist); exit 77 (skipped) without the dataset.
set -eu
train=$1
data=/usr/share/datasets/fashion-mnist
[ -f "$data/train-images-idx3-ubyte.gz" ] || { echo "no Fashion-MNIST in $data: skipped"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$(dirname "$0")/../scripts/slice-fashion-mnist" "$data" "$dir/data" 256 256 1
run() { EMBER_EMULATED_DEVICES=1 "$train" --data "$dir/data" --limit 4 --eval-limit 2 --workers 0 "$@"; }
keys() {  # the tensor names of a safetensors file
  /usr/bin/env python3 -c 'import json,struct,sys; f=open(sys.argv[1],"rb"); n=struct.unpack("<Q",f.read(8))[0]; print("\n".join(k for k in json.loads(f.read(n)) if k!="__metadata__"))' "$1"
}

run --device cuda:0 --amp --epochs 1 --checkpoint "$dir/ck.safetensors" | tee "$dir/first.txt"
grep -q 'mixed precision (float16, loss scaling)' "$dir/first.txt"
grep -Eq '^epoch 1  loss [0-9]+\.[0-9]+ ' "$dir/first.txt"
keys "$dir/ck.safetensors" > "$dir/keys.txt"
for k in scale growth_factor backoff_factor growth_interval _growth_tracker; do
  grep -qx "scaler.$k" "$dir/keys.txt"
done
run --device cuda:0 --amp --epochs 1 --checkpoint "$dir/ck.safetensors" --resume | tee "$dir/resumed.txt"
grep -Eq '^epoch 2  loss [0-9]+\.[0-9]+ ' "$dir/resumed.txt"

run --disable-cuda --amp --epochs 1 --checkpoint "$dir/cpu.safetensors" | tee "$dir/cpu.txt"
grep -q 'mixed precision (bfloat16)' "$dir/cpu.txt"
grep -Eq '^epoch 1  loss [0-9]+\.[0-9]+ ' "$dir/cpu.txt"
if keys "$dir/cpu.safetensors" | grep -q '^scaler\.'; then echo "a bfloat16 run saved a scaler" >&2; exit 1; fi

run --device cuda:0 --amp --cuda-graphs --epochs 1 | tee "$dir/graphs.txt"
grep -Eq '^epoch 1  loss [0-9]+\.[0-9]+ ' "$dir/graphs.txt"
echo "train --amp trained, checkpointed and resumed its scaler"
