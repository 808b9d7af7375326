"""decodekit's NS / RNS stacks (frozen bottom, the default) against the authors' code
(bdusell/nondeterministic-stack-rnn, tag ``iclr2022``) on identical random action weights in
float64: readings and gradients, unlimited and memory-limited, through the drivers of
benchmarks/bench_stack_vs_authors.py (so the speed table compares the same computation).

Optional: runs only when ``DECODEKIT_AUTHORS_SRC`` names an extracted checkout of the authors'
``src/`` (``git archive iclr2022 | tar -x``) and torch-semiring-einsum imports; never fetches."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_stack_vs_authors.py"


@pytest.fixture(scope="module")
def bench():
    """The benchmark module, with the authors' src/ importable (skips without it)."""
    src = os.environ.get("DECODEKIT_AUTHORS_SRC")
    if not src:
        pytest.skip("DECODEKIT_AUTHORS_SRC is not set (the authors' src/, tag iclr2022)")
    if not (Path(src) / "nsrnn" / "models" / "nondeterministic_stack.py").is_file():
        pytest.skip(f"DECODEKIT_AUTHORS_SRC={src} has no nsrnn/models/nondeterministic_stack.py")
    pytest.importorskip("torch_semiring_einsum", reason="torch-semiring-einsum (and pynvml) not importable")
    sys.path.insert(0, src)
    sys.path.insert(0, str(BENCH.parent))
    try:
        import bench_stack_vs_authors

        yield bench_stack_vs_authors
    finally:
        sys.path.remove(str(BENCH.parent))
        sys.path.remove(src)


CASES = [
    f"{kind}:{q}:{s}:{d}:{n}"
    for kind in ("ns", "rns")
    for q, s in ((2, 2), (2, 3), (3, 2))
    for d, n in (("-", 10), (3, 12), (5, 12))
]


@pytest.mark.parametrize("case", CASES)
def test_readings_and_gradients_equal_authors(bench, case):
    cfg = bench.Config.parse(case)
    logits, weights = bench.inputs(cfg, 3, torch.float64, seed=len(case))
    _, r_dk, g_dk = bench.one_pass("decodekit", cfg, logits, weights, block_size=32)
    _, r_au, g_au = bench.one_pass("authors", cfg, logits, weights, block_size=32)
    assert r_dk.shape == r_au.shape == (3, cfg.length, weights.shape[-1])
    torch.testing.assert_close(r_dk, r_au, rtol=0, atol=1e-12)
    assert torch.isfinite(g_dk).all() and g_dk.abs().max() > 0
    torch.testing.assert_close(g_dk, g_au, rtol=0, atol=1e-12)


def test_authors_block_size_does_not_change_readings(bench):
    """The table's block size 32 is a speed/memory knob of their einsum, not a different model."""
    cfg = bench.Config.parse("rns:2:3:-:9")
    logits, weights = bench.inputs(cfg, 2, torch.float64)
    _, r32, _ = bench.one_pass("authors", cfg, logits, weights, block_size=32)
    _, r2, _ = bench.one_pass("authors", cfg, logits, weights, block_size=2)
    torch.testing.assert_close(r32, r2, rtol=0, atol=1e-12)


def test_benchmark_script_runs(bench, tmp_path):
    """One tiny configuration end to end: alternating passes, a memory child, the table."""
    out = subprocess.run(
        [sys.executable, str(BENCH), "--authors-src", os.environ["DECODEKIT_AUTHORS_SRC"],
         "--configs", "ns:2:2:3:5", "--reps", "2", "--json", str(tmp_path / "r.json")],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "| NS | 2 | 2 | 3 | 5 |" in out
    assert (tmp_path / "r.json").is_file()
