"""Fast-forward under a JSON Schema with fixed keys (issue 40): model calls and CPU time per
generated token with and without ``fast_forward``, side by side in one run.

A random GPT-2 (2 layers, width 64, seeded) over a 50,000-token byte-level BPE trained on PTB
(``bench_readme_memory.model_dir``, cached under ``--work``), loaded as decodekit loads any model
directory; a schema whose keys, separators and enum values leave long stretches with one token
allowed. For each prompt and strategy, the same ``decodekit.generate`` call with and without
``fast_forward=True`` (alternated, ``--repeats`` rounds): the outputs must be equal, model calls
are counted (``step`` and ``step_many``), CPU time is the median per round. Prints a Markdown
table.

    python benchmarks/bench_fast_forward.py [--data ../shared/data] [--work /tmp/fast-forward]
        [--cache runs/byte-bpe] [--repeats 5] [--max-length 64]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

SCHEMA = {
    "type": "object",
    "properties": {
        "customer_name": {"type": "string", "maxLength": 6},
        "account_status": {"enum": ["active", "suspended", "closed"]},
        "loyalty_points": {"type": "integer", "minimum": 0, "maximum": 999},
        "preferred_contact": {"enum": ["email", "telephone"]},
    },
    "required": ["customer_name", "account_status", "loyalty_points", "preferred_contact"],
    "additionalProperties": False,
}
PROMPTS = ["the company said", "record:", "a new customer"]


class Counted:
    """A model whose ``step`` and ``step_many`` calls are counted (everything else delegated)."""

    def __init__(self, model):
        self.inner, self.calls = model, 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def step(self, state, tokens):
        self.calls += 1
        return self.inner.step(state, tokens)

    def step_many(self, state, tokens):
        from decodekit.models.base import step_many

        self.calls += 1
        return step_many(self.inner, state, tokens)


def main() -> None:
    here = Path(__file__).resolve().parents[1]
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=here.parent / "shared" / "data")
    ap.add_argument("--work", type=Path, default=Path("/tmp/fast-forward"))
    ap.add_argument("--cache", type=Path, default=None, help="the trained BPE's cache folder")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--max-length", type=int, default=64)
    ap.add_argument("--strategies", nargs="+", default=["greedy", "masked-beam"])
    ap.add_argument("--layers", type=int, default=2, help="of the random GPT-2 (a new directory per size)")
    ap.add_argument("--width", type=int, default=64)
    args = ap.parse_args()
    torch.set_num_threads(1)

    from bench_readme_memory import model_dir

    import decodekit

    lm = decodekit.load_model(model_dir(args.data, args.work, args.cache, args.layers, args.width))
    constraint = decodekit.json_schema(SCHEMA)
    print(f"random GPT-2 {args.layers}x{args.width}, V = {lm.vocab_size:,}; {json.dumps(SCHEMA)[:60]}...")
    print(f"({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {args.repeats} rounds alternated)\n")
    print(
        "| strategy | tokens | model calls per token: plain / forced tokens / + forced texts drafted "
        "| CPU ms per token: plain / forced tokens / + texts | speed-up | outputs equal |"
    )
    print("|---|---|---|---|---|---|")
    # forced tokens fed with the chosen ones (item 2a), then forced texts drafted too (2b: greedy
    # and sampling verify them speculatively, the beam searches read them ahead in the loop)
    modes = {
        "plain": {},
        "tokens": {"fast_forward": True},
        "texts": {"fast_forward": True, "draft_forced_text": True},
    }
    for strategy in args.strategies:
        config = dict(strategy=strategy, max_length=args.max_length, constraint=constraint, beam_size=4)
        times = {m: [] for m in modes}
        calls, outputs = {}, {}
        for _ in range(args.repeats):
            for mode, extra in modes.items():
                model, settings = Counted(lm), decodekit.GenerationConfig(**config, **extra)
                t = time.process_time()  # one prompt at a time, as the command line runs them
                hyps = [decodekit.generate(model, prompt, settings) for prompt in PROMPTS]
                times[mode].append(time.process_time() - t)
                calls[mode], outputs[mode] = model.calls, [[h.tokens for h in hs] for hs in hyps]
        tokens = sum(len(hs[0]) + 1 for hs in outputs["plain"] if hs)  # EOS counted
        ms = {m: 1e3 * statistics.median(times[m]) / max(tokens, 1) for m in times}
        same = all(outputs[m] == outputs["plain"] for m in modes)
        shown_calls = " / ".join(f"{calls[m] / tokens:.2f}" for m in modes)
        shown_ms = " / ".join(f"{ms[m]:.1f}" for m in modes)
        speedup = " / ".join(f"{ms['plain'] / ms[m]:.2f}x" for m in ("tokens", "texts"))
        print(
            f"| {strategy} | {tokens} | {shown_calls} | {shown_ms} | {speedup} | {'yes' if same else 'NO'} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
