#!/usr/bin/env python3
"""Side by side: bench_gpu's output (ember) and bench/torch_gpu.py's (PyTorch), from the same
gpu-run, as a markdown table of ember / PyTorch per case, then issue 23's four targets:

- element-wise add at >= 90% of the device's copy bandwidth (ember's large_add against the
  higher of the two copy_d2d/64MiB bandwidths measured in the same run);
- TF32 matmul >= 0.97x PyTorch's throughput (matmul/1024/tf32_on: PyTorch us / ember us);
- a small op's launch overhead <= PyTorch's (small_add_host: the issuing thread's wall
  clock per op);
- the CNN training step <= 1.0x PyTorch's time (cnn_step/64);

then issue 38's: the float16 CNN step (cnn_step_amp/64 and /1024, autocast and GradScaler)
faster than the float32 one (cnn_step/64 and /1024), for ember and for PyTorch.

    python3 bench/gpu_ratios.py EMBER_OUTPUT TORCH_OUTPUT

A case missing from either output, failed or skipped is listed with why, never dropped. When
either output is a dry run (ember on an emulated device, PyTorch on the cpu) the table says
so: those are not GPU numbers. Exits 2 when an output cannot be read or holds no case."""
import re
import sys

LINE = re.compile(r"^(ember|torch)\s+(\S+)\s+(?:([0-9.]+|nan|inf) us\s*(.*)|(failed|skipped): (.*))$")
COPY_BYTES = 2 * 4 * (16 << 20)  # copy_d2d/64MiB reads and writes 64 MiB
ADD_BYTES = 3 * 4 * (1 << 24)    # large_add/16777216 reads two and writes one


def parse(path, who):
    """{case: (us or None, note)} in output order, and the '#' header lines."""
    cases, headers = {}, []
    with open(path, encoding="utf-8", errors="replace") as f:
        for raw in f:
            line = raw.rstrip("\n")
            if line.startswith("#"):
                headers.append(line.lstrip("# "))
                continue
            m = LINE.match(line)
            if not m or m.group(1) != who:
                continue
            name = m.group(2)
            if m.group(3) is not None:
                cases[name] = (float(m.group(3)), m.group(4).strip())
            else:
                cases[name] = (None, f"{m.group(5)}: {m.group(6).strip()}")
    return cases, headers


def fmt_us(v):
    return "—" if v is None else f"{v:.2f}"


def main(argv):
    if len(argv) != 3:
        sys.exit("usage: gpu_ratios.py EMBER_OUTPUT TORCH_OUTPUT")
    try:
        ember, ember_head = parse(argv[1], "ember")
        torch, torch_head = parse(argv[2], "torch")
    except OSError as e:
        print(f"gpu_ratios.py: cannot read an output: {e}", file=sys.stderr)
        return 2
    if not ember and not torch:
        print(f"gpu_ratios.py: no case in {argv[1]} nor in {argv[2]}", file=sys.stderr)
        return 2
    dry = [h for h in ember_head if "emulated" in h] + [h for h in torch_head if "dry run" in h]
    print("# ember / PyTorch on the GPU, same run\n")
    for h in ember_head + torch_head:
        print(f"- {h}")
    if dry:
        print("\n**Dry run: not GPU numbers** (ember on an emulated device and/or PyTorch on the cpu); "
              "the targets below only exercise the table.")
    print("\n| case | ember us | PyTorch us | ember / PyTorch | notes |\n|---|---:|---:|---:|---|")
    missing = []
    for name in list(ember) + [n for n in torch if n not in ember]:
        e_us, e_note = ember.get(name, (None, "missing from ember's output"))
        t_us, t_note = torch.get(name, (None, "missing from PyTorch's output"))
        ratio = f"{e_us / t_us:.2f}" if e_us is not None and t_us else "—"
        notes = "; ".join(n for n in (f"ember: {e_note}" if e_note else "", f"PyTorch: {t_note}" if t_note else "") if n)
        if e_us is None or t_us is None:
            missing.append(f"{name}: " + "; ".join(n for n in (e_note if e_us is None else "",
                                                              t_note if t_us is None else "") if n))
        print(f"| {name} | {fmt_us(e_us)} | {fmt_us(t_us)} | {ratio} | {notes.replace('|', '/')} |")

    def us(side, name):
        return side.get(name, (None, ""))[0]

    def verdict(ok):
        return "met" if ok else "**not met**"

    print("\n## Targets (issue 23)\n")
    copies = [us(s, "copy_d2d/64MiB") for s in (ember, torch)]
    copies = [COPY_BYTES / (c * 1e-6) / 1e9 for c in copies if c]
    add = us(ember, "large_add/16777216")
    if copies and add:
        share = ADD_BYTES / (add * 1e-6) / 1e9 / max(copies)
        print(f"- element-wise add >= 90% of copy bandwidth: {100 * share:.1f}% of {max(copies):.1f} GB/s: "
              f"{verdict(share >= 0.90)}")
    else:
        print("- element-wise add >= 90% of copy bandwidth: not measured (large_add or copy_d2d not timed: see below)")
    targets = [("TF32 matmul >= 0.97x PyTorch's throughput", "matmul/1024/tf32_on", lambda e, t: t / e, 0.97, ">="),
               ("small op launch overhead <= PyTorch's (small_add_host)", "small_add_host", lambda e, t: e / t, 1.0, "<="),
               ("CNN training step <= 1.0x PyTorch's time", "cnn_step/64", lambda e, t: e / t, 1.0, "<=")]
    for label, name, ratio_of, bound, op in targets:
        e, t = us(ember, name), us(torch, name)
        if e and t:
            r = ratio_of(e, t)
            print(f"- {label}: {r:.2f}: {verdict(r >= bound if op == '>=' else r <= bound)}")
        else:
            print(f"- {label}: not measured ({name} not timed on both sides: see below)")
    print("\n## Mixed precision (issue 38)\n")
    for batch in (64, 1024):
        for side, who in ((ember, "ember"), (torch, "PyTorch")):
            full, half = us(side, f"cnn_step/{batch}"), us(side, f"cnn_step_amp/{batch}")
            label = f"{who}'s float16 CNN step (batch {batch}) faster than its float32 step"
            if full and half:
                print(f"- {label}: {half / full:.2f}x the float32 step's time: {verdict(half < full)}")
            else:
                print(f"- {label}: not measured (cnn_step/{batch} or cnn_step_amp/{batch} not timed: see below)")
    if missing:
        print("\n## Missing, failed or skipped cases\n")
        for m in missing:
            print(f"- {m}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
