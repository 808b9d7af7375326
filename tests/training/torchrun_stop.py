"""A ``decodekit`` worker for tests/training/test_torchrun.py: rank 1 gets SIGINT just after the
all-reduce of epoch 1's last update, while rank 0 goes on to validation and the epoch's save
(issue 23.3's deadlock); then the ordinary command line runs."""

import os
import signal
import sys

from decodekit.cli import main
from decodekit.data import num_bptt_batches
from decodekit.training import loop

real_update = loop._Run.update


def update(self, *args, **kwargs):
    real_update(self, *args, **kwargs)
    last = num_bptt_batches(self.data, self.config.bptt)
    if os.environ["RANK"] == "1" and self.loop.epoch == 1 and self.loop.position == last:
        os.kill(os.getpid(), signal.SIGINT)


loop._Run.update = update
main(sys.argv[1:])
