#!/usr/bin/env python3
"""checkpoint_metadata.py SRC DST [KEY=VALUE...]

Writes DST: the safetensors file SRC (or, with SRC '-', a file with no tensor) with its
"__metadata__" replaced by the KEY=VALUE entries given (ember's own "ember." entries are
kept). For examples/resume_refusals_test.sh: checkpoints of another program, or with
edited metadata, made without ember.
"""
import json
import struct
import sys


def main():
    src, dst, *entries = sys.argv[1:]
    header, data = {}, b""
    if src != "-":
        with open(src, "rb") as f:
            raw = f.read()
        (length,) = struct.unpack("<Q", raw[:8])
        header = json.loads(raw[8 : 8 + length])
        data = raw[8 + length :]
    metadata = {k: v for k, v in header.get("__metadata__", {}).items() if k.startswith("ember.")}
    for entry in entries:
        key, value = entry.split("=", 1)
        metadata[key] = value
    header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)  # safetensors pads the header to 8 bytes
    with open(dst, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


if __name__ == "__main__":
    main()
