# Starts torchrun (python3 -m torch.distributed.run) with its own arguments.
#
# Why a wrapper: Debian's torchrun (PyTorch 1.13) fails at start-up on Python 3.11, before
# it launches anything: its default --redirects/--tee "0" goes through Std.from_str("0"),
# which iterates the IntFlag Std to find the member whose value is 0, and Python 3.11 no
# longer yields an IntFlag's zero member (Std.NONE) when iterating. This maps that one
# value and changes nothing else; on other versions it is a plain torchrun.
import sys

from torch.distributed.elastic.multiprocessing import api
from torch.distributed import run

_from_str = api.Std.from_str


def _from_str_zero(vm):
    if vm == "0":
        return api.Std.NONE
    return _from_str(vm)


api.Std.from_str = staticmethod(_from_str_zero)

if __name__ == "__main__":
    sys.argv[0] = "torchrun"
    run.main()
