#!/usr/bin/env python3
"""Rewrites a CUDA source for the host execution layer (cuda_host.h): every
`kernel<<<grid, block[, shared[, stream]]>>>(args)` becomes
`::ember_cuda_host::launch("kernel", fibers, grid, block, ...)([&](auto&... a) { kernel(a...); }, args)`,
every `__shared__ [alignas(A)] T name[N]...;` becomes `auto& name = ::ember_cuda_host::shared<T[N]..., A>("name", [] {});`,
every `extern __shared__ [alignas(A)] T name[];` becomes `T* const name = ::ember_cuda_host::dynamic_shared<T>();`,
and a file that includes <cassert> gets the device assert after its last include. `fibers` is true when the
file (or a header of src/backends/cuda it includes) uses block or warp synchronisation.
Usage: rewrite_launches.py SOURCE OUTPUT"""
import os
import re
import sys

SHARED = re.compile(r"(extern\s+)?__shared__\s+(?:alignas\(([^)]*)\)\s+)?([A-Za-z_][\w:<>, ]*?)\s+(\w+)\s*((?:\[[^\]]*\])*)\s*;")
SYNC = re.compile(r"__syncthreads|__syncwarp|__shfl_|__ballot_sync|__any_sync|__all_sync")


def matching(text, start, open_ch, close_ch):
    depth = 0
    for i in range(start, len(text)):
        if text[i] == open_ch:
            depth += 1
        elif text[i] == close_ch:
            depth -= 1
            if depth == 0:
                return i
    raise SystemExit(f"unbalanced {open_ch} at offset {start}")


def kernel_start(text, end):
    """Start of the kernel expression ending before `end` (a name with template arguments)."""
    i = end
    while True:
        while i > 0 and text[i - 1].isspace():
            i -= 1
        if text[i - 1] == ">":  # template argument list
            depth = 0
            while True:
                i -= 1
                if text[i] == ">":
                    depth += 1
                elif text[i] == "<":
                    depth -= 1
                    if depth == 0:
                        break
            continue
        j = i
        while j > 0 and (text[j - 1].isalnum() or text[j - 1] in "_:"):
            j -= 1
        if j == i:
            raise SystemExit(f"no kernel name before offset {end}")
        return j


def split_top_level(text):
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    parts.append(cur.strip())
    return parts


def uses_sync(path, seen):
    if path in seen or not os.path.exists(path):
        return False
    seen.add(path)
    text = open(path).read()
    if SYNC.search(text):
        return True
    root = os.path.dirname(os.path.dirname(os.path.dirname(path)))  # .../src
    for inc in re.findall(r'#include "(backends/cuda/[^"]+)"', text):
        if uses_sync(os.path.join(root, inc), seen):
            return True
    return False


def rewrite(text, fibers):
    out, pos = [], 0
    while True:
        at = text.find("<<<", pos)
        if at < 0:
            out.append(text[pos:])
            return "".join(out)
        name_start = kernel_start(text, at)
        name = text[name_start:at].strip()
        close = text.find(">>>", at)
        config = split_top_level(text[at + 3:close])
        paren = text.index("(", close)
        end = matching(text, paren, "(", ")")
        args = text[paren + 1:end]
        quoted = " ".join(name.split()).replace('"', '\\"')
        out.append(text[pos:name_start])
        out.append(f'::ember_cuda_host::launch("{quoted}", {"true" if fibers else "false"}, {", ".join(config)})('
                   f"[&](auto&... ember_host_args) {{ {name}(ember_host_args...); }}"
                   + (f", {args})" if args.strip() else ")"))
        pos = end + 1


def shared_declaration(m):
    extern, align, type_, name, dims = m.groups()
    if extern:
        return f"{type_}* const {name} = ::ember_cuda_host::dynamic_shared<{type_}>();"
    args = f"{type_}{dims}" + (f", {align}" if align else "")
    return f'auto& {name} = ::ember_cuda_host::shared<{args}>("{name}", [] {{}});'


def main():
    source, output = sys.argv[1], sys.argv[2]
    text = open(source).read()
    text = SHARED.sub(shared_declaration, text)
    if "#include <cassert>" in text:  # after the last include: a later <cassert> would redefine assert
        last = [m.end() for m in re.finditer(r"^#include .*$", text, re.M)][-1]
        text = text[:last] + ' // then the device assert:\n#include "cuda_host_assert.h"' + text[last:]
    result = f'#line 1 "{source}"\n' + rewrite(text, uses_sync(os.path.abspath(source), set()))
    os.makedirs(os.path.dirname(output), exist_ok=True)
    if not os.path.exists(output) or open(output).read() != result:
        with open(output, "w") as f:
            f.write(result)


if __name__ == "__main__":
    main()
