#!/usr/bin/env bash
# wordlm trains a tiny model for a few batches, padded and --packed, on the cpu and on a cuda
# device (emulated without a GPU), and prints a validation perplexity and a sample; it saves and
# resumes a checkpoint, and refuses foreign checkpoints and the flags it does not support.
# Skipped (77) without Debian's fortunes.
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
refused 2 "--ddp and --data-parallel are not supported by wordlm" --ddp
refused 2 "--optimizer must be sgd or adamw, not 'adam'" --optimizer adam
echo ok
