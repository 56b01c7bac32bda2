# Prints the local address of every socket listening on MASTER_PORT, from /proc/net/tcp
# and /proc/net/tcp6 (test_torch_interop.cpp runs it under ember-run, whose store listens
# there): "127.0.0.1" for loopback, "0.0.0.0" or "::" for every interface.
import ipaddress
import os

port = int(os.environ["MASTER_PORT"])
for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
    with open(table) as f:
        next(f)
        for line in f:
            fields = line.split()
            address, local_port = fields[1].split(":")
            if int(local_port, 16) != port or fields[3] != "0A":  # 0A: LISTEN
                continue
            raw = bytes.fromhex(address)
            # The kernel writes each 32-bit word in host (little-endian) order.
            raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
            print("listening on", ipaddress.ip_address(raw))
