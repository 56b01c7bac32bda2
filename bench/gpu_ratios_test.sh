#!/bin/sh
# ctest gpu_benchmarks_side_by_side: bench_gpu's output format on an emulated device (its
# header and lines say so; an unknown --only name is refused), and gpu_ratios.py on fixed
# outputs: the ratio per case, issue 23's four verdicts and issue 38's float16-step verdicts
# from those numbers, a failed or skipped case listed with why, a dry run labelled, unreadable
# input refused. Exit 77 (skipped) without python3.
set -eu
bench_gpu=$1
ratios=$(dirname "$0")/gpu_ratios.py
command -v python3 >/dev/null || { echo "no python3: skipped"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

"$bench_gpu" --emulated --only small_add_host,event_record_sync >"$dir/emulated.txt"
cat "$dir/emulated.txt"
grep -q '^# ember bench_gpu on cuda:0: .*backend: emulated' "$dir/emulated.txt"
grep -Eq '^ember small_add_host +[0-9.]+ us wall clock per enqueue \[emulated\]$' "$dir/emulated.txt"
grep -Eq '^ember event_record_sync +[0-9.]+ us +\[emulated\]$' "$dir/emulated.txt"
[ "$(grep -c '^ember ' "$dir/emulated.txt")" = 2 ]
if "$bench_gpu" --emulated --only no_such_case 2>"$dir/err.txt"; then exit 1; fi
grep -q "no case named 'no_such_case'" "$dir/err.txt"

# copy_d2d 100 us: 1342.2 GB/s; large_add 160 us: 1258.3 GB/s, 93.7% of it (met).
cat >"$dir/ember.txt" <<'END'
# ember bench_gpu on cuda:0: Test GPU, backend: driver
ember copy_d2d/64MiB                            100.00 us
ember large_add/16777216                        160.00 us
ember small_add_host                              2.50 us wall clock per enqueue
ember matmul/1024/tf32_on                        20.00 us
ember cnn_step/64                              failed: CudaError: an illegal memory access
ember cnn_step_amp/64                           600.00 us
END
cat >"$dir/torch.txt" <<'END'
# torch 2.11.0 on Test GPU, timer: CUDA events
torch copy_d2d/64MiB                            110.00 us
torch large_add/16777216                        150.00 us
torch small_add_host                              5.00 us wall clock per enqueue
torch matmul/1024/tf32_on                        19.00 us
torch cnn_step/64                              1000.00 us
torch cnn_step_amp/64                           800.00 us
torch stream_wait_event                 skipped: needs a CUDA device
END
python3 "$ratios" "$dir/ember.txt" "$dir/torch.txt" >"$dir/table.md"
cat "$dir/table.md"
grep -q '^| large_add/16777216 | 160.00 | 150.00 | 1.07 |' "$dir/table.md"
grep -q '^| small_add_host | 2.50 | 5.00 | 0.50 |' "$dir/table.md"
grep -q 'add >= 90% of copy bandwidth: 93.7% of 1342.2 GB/s: met$' "$dir/table.md"
grep -q "TF32 matmul >= 0.97x PyTorch's throughput: 0.95: \*\*not met\*\*$" "$dir/table.md"
grep -q "launch overhead <= PyTorch's (small_add_host): 0.50: met$" "$dir/table.md"
grep -q "CNN training step <= 1.0x PyTorch's time: not measured" "$dir/table.md"
grep -q '^- cnn_step/64: failed: CudaError: an illegal memory access$' "$dir/table.md"
grep -q "^- PyTorch's float16 CNN step (batch 64) faster than its float32 step: 0.80x the float32 step's time: met$" "$dir/table.md"
grep -q "^- ember's float16 CNN step (batch 64) faster than its float32 step: not measured" "$dir/table.md"
grep -q "^- PyTorch's float16 CNN step (batch 1024) faster than its float32 step: not measured" "$dir/table.md"
grep -q "^- stream_wait_event: missing from ember's output; skipped: needs a CUDA device$" "$dir/table.md"
if grep -q 'Dry run' "$dir/table.md"; then exit 1; fi

python3 "$ratios" "$dir/emulated.txt" "$dir/torch.txt" | grep -q '^\*\*Dry run: not GPU numbers\*\*'
if python3 "$ratios" "$dir/absent.txt" "$dir/torch.txt" 2>"$dir/err.txt"; then exit 1; fi
grep -q 'cannot read an output' "$dir/err.txt"
echo "bench_gpu and gpu_ratios.py: format, ratios and verdicts as expected"
