"""benchmarks/bench_batch_masks.py stays runnable: its options parse, and a batch of decodekit
cursors in different states fills the same bitmask as ``allowed`` (a toy byte vocabulary; the
peers are the benchmark's business, not the suite's)."""

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
bench = pytest.importorskip("bench_batch_masks")

TOKENS = tuple([bytes([b]) for b in range(256)] + [b"20", b"24", b"-0", None])  # EOS last
EOS = len(TOKENS) - 1


def test_options_parse():
    args = bench.parse_args(["--rows", "1", "4", "--budgets", "per-row", "--patterns", "email"])
    assert args.rows == [1, 4] and args.budgets == "per-row" and args.patterns == ["email"]


@pytest.mark.parametrize("per_row", [False, True])
def test_a_batch_of_decodekit_cursors(per_row):
    engine = bench.make_engines(["decodekit"], TOKENS, EOS, None)["decodekit"]
    handle = engine.compile(r"[0-9]{4}-[0-9]{2}")
    ids = [TOKENS.index(b"20"), TOKENS.index(b"24"), TOKENS.index(b"-0"), ord("5")]
    batch = bench.Batch(engine, handle, ids, rows=6, per_row=per_row)
    assert batch.states.tolist() == [c["states"].item() for c in batch.cursors]
    assert len(set(batch.states.tolist())) == 4  # rows at positions 0..3, then 0, 1 again
    want = batch.auto.allowed(batch.states).numpy()
    assert np.array_equal(batch.allowed(len(TOKENS)), want)
    logits = torch.zeros(6, len(TOKENS))
    batch.mask_apply(logits)
    assert np.array_equal((logits == 0).numpy(), want)
