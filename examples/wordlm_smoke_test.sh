#!/usr/bin/env bash
# wordlm trains a tiny model for a few batches, padded and --packed, on the cpu and on a cuda
# device (emulated without a GPU), and prints a validation perplexity and a sample; it saves and
# resumes a checkpoint, and refuses foreign checkpoints and the flags it does not support;
# --data-parallel and --ddp (under ember-run) train as one device does on the whole batch.
# Skipped (77) without Debian's fortunes.
set -euo pipefail
wordlm="$1"
ember_run="$2"
[ -d /usr/share/games/fortunes ] || exit 77
small=(--max-batches 3 --log-interval 3 --emsize 16 --nhid 16 --vocab 300 --sentences 1)
for mode in "" --packed; do
  for device in --disable-cuda ""; do
    out=$(OPENBLAS_NUM_THREADS=1 "$wordlm" $mode $device "${small[@]}")
    grep -q "valid ppl" <<<"$out" || { echo "no validation line ($mode $device):"; echo "$out"; exit 1; }
    grep -q "| sample 1 |" <<<"$out" || { echo "no sample ($mode $device):"; echo "$out"; exit 1; }
  done
done
# --checkpoint after each epoch, --resume at the next one; a checkpoint of another vocabulary
# or optimizer is refused (exit 1, the file named), and so are the flags it does not support.
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
ck=$dir/wordlm.safetensors
OPENBLAS_NUM_THREADS=1 "$wordlm" --disable-cuda "${small[@]}" --checkpoint "$ck" >/dev/null
out=$(OPENBLAS_NUM_THREADS=1 "$wordlm" --disable-cuda "${small[@]}" --checkpoint "$ck" --resume)
grep -q "resumed from $ck after epoch 1" <<<"$out" || { echo "no resume line:"; echo "$out"; exit 1; }
grep -q "end of epoch   2" <<<"$out" || { echo "the resumed run is not epoch 2:"; echo "$out"; exit 1; }
# The resumed epoch 2 is the whole run's epoch 2, to the printed digits.
whole=$(OPENBLAS_NUM_THREADS=1 "$wordlm" --disable-cuda "${small[@]}" --epochs 2 | grep "^| epoch   2 \|end of epoch   2" | sed 's/ms\/batch.*loss/loss/; s/time: *[0-9.]*s//; s/words\/s.*//')
resumed=$(grep "^| epoch   2 \|end of epoch   2" <<<"$out" | sed 's/ms\/batch.*loss/loss/; s/time: *[0-9.]*s//; s/words\/s.*//')
[[ -n "$whole" && "$whole" == "$resumed" ]] || { echo "resumed epoch 2 differs from the whole run's:"; echo "$whole"; echo "$resumed"; exit 1; }
# --amp: bfloat16 on the cpu, float16 with a GradScaler on a cuda device (its state saved
# under "scaler." and restored), both to a finite validation perplexity.
for device in --disable-cuda ""; do
  out=$(OPENBLAS_NUM_THREADS=1 "$wordlm" --amp $device "${small[@]}" --checkpoint "$dir/amp.safetensors")
  grep -Eq "valid ppl +[0-9]" <<<"$out" || { echo "no finite validation line (--amp $device):"; echo "$out"; exit 1; }
done
python3 -c 'import json,struct,sys; f=open(sys.argv[1],"rb"); n=struct.unpack("<Q",f.read(8))[0]; h=json.loads(f.read(n)); sys.exit(0 if "scaler.scale" in h else 1)' "$dir/amp.safetensors" ||
  { echo "the float16 --amp checkpoint has no scaler.scale"; exit 1; }
out=$(OPENBLAS_NUM_THREADS=1 "$wordlm" --amp "${small[@]}" --checkpoint "$dir/amp.safetensors" --resume)
grep -q "resumed from $dir/amp.safetensors after epoch 1" <<<"$out" || { echo "no --amp resume line:"; echo "$out"; exit 1; }
# --data-parallel over 2 emulated devices and --ddp over 2 ranks (cpu, and a cuda device
# each) split the batch's columns: without dropout every printed loss and the validation
# perplexity are the single device's (the gradient is the whole batch's mean). A rank that
# kept its own half-batch gradient would print another perplexity (55.16 instead of 60.54).
trained() { grep "^| epoch\|end of epoch" | sed 's/ms\/batch *[0-9.]*//; s/time: *[0-9.]*s//; s/words\/s.*//'; }
tiny=("${small[@]}" --dropout 0 --no-tf32 --max-batches 4 --log-interval 2)
single=$(OPENBLAS_NUM_THREADS=1 "$wordlm" "${tiny[@]}" | trained)
[[ -n "$single" ]] || { echo "no training lines from the single-device run"; exit 1; }
out=$(OPENBLAS_NUM_THREADS=1 EMBER_EMULATED_DEVICES=2 "$wordlm" "${tiny[@]}" --data-parallel)
grep -q "DataParallel over 2 devices" <<<"$out" || { echo "no DataParallel line:"; echo "$out"; exit 1; }
[[ "$(trained <<<"$out")" == "$single" ]] ||
  { echo "--data-parallel differs from one device:"; echo "$single"; trained <<<"$out"; exit 1; }
for device in "" --disable-cuda; do
  out=$(OPENBLAS_NUM_THREADS=1 timeout 300 "$ember_run" --nproc-per-node=2 --term-timeout=10 "$wordlm" "${tiny[@]}" --ddp $device)
  grep -q "DistributedDataParallel on 2 ranks, 10 columns each" <<<"$out" || { echo "no DDP line ($device):"; echo "$out"; exit 1; }
  [[ $(grep -c "end of epoch" <<<"$out") == 1 ]] || { echo "not one lead rank ($device):"; echo "$out"; exit 1; }
  [[ "$(trained <<<"$out")" == "$single" ]] ||
    { echo "--ddp $device differs from one device:"; echo "$single"; trained <<<"$out"; exit 1; }
done
refused() {  # refused EXIT "stderr text" ARGS...
  local want_rc=$1 want=$2 rc=0
  shift 2
  OPENBLAS_NUM_THREADS=1 "$wordlm" --disable-cuda "$@" >/dev/null 2>"$dir/err" || rc=$?
  if [[ $rc != "$want_rc" ]] || ! grep -qF -- "$want" "$dir/err"; then
    echo "wordlm $*: exit $rc (wanted $want_rc and '$want'):"; cat "$dir/err"; exit 1
  fi
}
refused 1 "$ck: its vocabulary" "${small[@]/300/299}" --checkpoint "$ck" --resume
refused 1 "$ck: its optimizer state does not fit this run" "${small[@]}" --optimizer adamw --checkpoint "$ck" --resume
refused 2 "--packed does not go with --ddp or --data-parallel" --packed --data-parallel
refused 2 "--ddp runs under ember-run" --ddp
refused 2 "--data-parallel needs cuda devices; the device is cpu" --data-parallel
refused 2 "--optimizer must be sgd or adamw, not 'adam'" --optimizer adam
echo ok
