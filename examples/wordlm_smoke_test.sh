#!/usr/bin/env bash
# wordlm trains a tiny model for a few batches, padded and --packed, on the cpu and on a cuda
# device (emulated without a GPU), and prints a validation perplexity and a sample; it refuses
# the flags it does not support yet. Skipped (77) without Debian's fortunes.
set -euo pipefail
wordlm="$1"
[ -d /usr/share/games/fortunes ] || exit 77
small=(--max-batches 3 --log-interval 3 --emsize 16 --nhid 16 --vocab 300 --sentences 1)
for mode in "" --packed; do
  for device in --disable-cuda ""; do
    out=$(OPENBLAS_NUM_THREADS=1 "$wordlm" $mode $device "${small[@]}")
    grep -q "valid ppl" <<<"$out" || { echo "no validation line ($mode $device):"; echo "$out"; exit 1; }
    grep -q "| sample 1 |" <<<"$out" || { echo "no sample ($mode $device):"; echo "$out"; exit 1; }
  done
done
if "$wordlm" --checkpoint x.safetensors 2>/dev/null; then echo "--checkpoint was accepted"; exit 1; fi
echo ok
