"""A ``decodekit`` worker for tests/training/test_torchrun.py: rank 1 kills itself (SIGKILL, as
the out-of-memory killer would) after its second update, while rank 0 waits in the next
collective; then the ordinary command line runs."""

import os
import signal
import sys

from decodekit.cli import main
from decodekit.training import loop

real_update = loop._Run.update
updates = 0


def update(self, *args, **kwargs):
    global updates
    real_update(self, *args, **kwargs)
    updates += 1
    if os.environ["RANK"] == "1" and updates == 2:
        os.kill(os.getpid(), signal.SIGKILL)


loop._Run.update = update
main(sys.argv[1:])
