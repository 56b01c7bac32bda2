# PyTorch's TCPStore against ember's store, for test_torch_interop.cpp.
#   torch_store_ops.py client PORT: a PyTorch client of the store ember serves on PORT.
#   torch_store_ops.py server PORT: a PyTorch store on PORT that an ember client uses;
#     it waits for the ember client's "done" and checks what the client set.
# PyTorch's client puts "/" before every key: ember sees "/key" for PyTorch's "key".
import sys
from datetime import timedelta

import torch.distributed as dist

mode, port = sys.argv[1], int(sys.argv[2])


def expect(what, got, want):
    if got != want:
        print(f"{what}: got {got!r}, expected {want!r}", flush=True)
        sys.exit(1)


if mode == "client":
    s = dist.TCPStore("127.0.0.1", port, None, False, timedelta(seconds=30), wait_for_workers=False)
    s.set("k", "v")
    expect("get", s.get("k"), b"v")
    expect("add", s.add("n", 5), 5)
    expect("add", s.add("n", 2), 7)
    expect("compare_set", s.compare_set("k", "v", "w"), b"w")
    expect("compare_set mismatch", s.compare_set("k", "v", "x"), b"w")
    expect("num_keys", s.num_keys(), 3)  # k, n and from_ember
    expect("delete", s.delete_key("n"), True)
    expect("delete missing", s.delete_key("n"), False)
    try:
        s.wait(["never"], timedelta(milliseconds=300))
        expect("wait", "returned", "a timeout")
    except RuntimeError as e:
        expect("wait timeout", "timeout" in str(e).lower() or "timed out" in str(e).lower(), True)
    expect("get from ember", s.get("from_ember"), b"hello")
    # ADD reads the stored value as PyTorch's server does (std::stoll), and a sum past
    # int64 wraps as there (issue 34, item 15); the connection stays usable throughout.
    for text, amount, want in [(" 12", 5, 17), ("+5", 1, 6), ("12abc", 1, 13), ("0x10", 1, 1),
                               ("-7", 0, -7), (str(2**63 - 1), 1, -2**63)]:
        s.set("counter", text)
        expect(f"add to {text!r}", s.add("counter", amount), want)
        expect(f"the counter after adding to {text!r}", s.get("counter"), str(want).encode())
    expect("num_keys after the adds", s.num_keys(), 3)  # k, from_ember and counter
    print("torch client ok", flush=True)
else:
    s = dist.TCPStore("127.0.0.1", port, None, True, timedelta(seconds=60), wait_for_workers=False)
    s.wait(["done"])
    expect("ember's set", s.get("ember_key"), b"ember value")
    expect("ember's add", s.get("counter"), b"12")
    print("torch server ok", flush=True)
