#!/bin/sh
# examples/train for one epoch on the cpu and its PyTorch 1.13 peer (bench/train_pytorch.py)
# in turn on this machine, ROUNDS times (default 2), alternating which goes first, with the
# load average before each run: the README states train's speed as the ratio of the two in
# one such run (absolute images/s differ threefold between machines of one kind).
#   bench/train_side_by_side.sh build/default/examples/train [ROUNDS]
set -eu
train=$1
rounds=${2:-2}
here=$(dirname "$0")
echo "machine: $(nproc) cores, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)"
ember() { echo "ember (load $(cut -d' ' -f1 /proc/loadavg)):"; "$train" --disable-cuda --epochs 1 | grep '^epoch'; }
torch() { echo "pytorch (load $(cut -d' ' -f1 /proc/loadavg)):"; /usr/bin/python3 "$here/train_pytorch.py" --epochs 1; }
i=0
while [ "$i" -lt "$rounds" ]; do
  if [ $((i % 2)) = 0 ]; then ember; torch; else torch; ember; fi
  i=$((i + 1))
done
