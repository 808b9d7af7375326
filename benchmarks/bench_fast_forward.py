"""Fast-forward under a JSON Schema with fixed keys (issue 40): model calls and CPU time per
generated token with and without ``fast_forward``, side by side in one run.

A random GPT-2 (2 layers, width 64, seeded) over a 50,000-token byte-level BPE trained on PTB
(``bench_readme_memory.model_dir``, cached under ``--work``), loaded as decodekit loads any model
directory; a schema whose keys, separators and enum values leave long stretches with one token
allowed. For each prompt and strategy, the same ``decodekit.generate`` call with and without
``fast_forward=True``, then with ``draft_forced_text=True`` too (alternated, ``--repeats``
rounds): the outputs must be equal (a sampler keeps the distribution, not the draws: tested in
tests/decoding), model calls are counted (``step`` and ``step_many``), CPU time is the median per
round. Prints a Markdown table.

``--train-steps N`` first fine-tunes the random GPT-2 for N updates (AdamW, batch 16, seeded) on
the prompts followed by random records of the schema, each record tokenized canonically (the
tokenizer's own spelling of the whole text), as every model trained on text has seen its keys
spelt: the drafts of forced texts are then the model's own choices, as they would be for a
pretrained model, where a random model picks other spellings of the same text. Kept under
``--work`` per size and step count.

    python benchmarks/bench_fast_forward.py [--data ../shared/data] [--work /tmp/fast-forward]
        [--cache runs/byte-bpe] [--repeats 5] [--max-length 64] [--train-steps 0]
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
STATUSES, CONTACTS = (
    SCHEMA["properties"]["account_status"]["enum"],
    SCHEMA["properties"]["preferred_contact"]["enum"],
)


def random_record(rng) -> str:
    """One record of SCHEMA as compact JSON (the spacing decodekit's schema text allows)."""
    name = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(0, 6)))
    record = {
        "customer_name": name,
        "account_status": rng.choice(STATUSES),
        "loyalty_points": rng.randint(0, 999),
        "preferred_contact": rng.choice(CONTACTS),
    }
    return json.dumps(record, separators=(",", ":"))


def trained_dir(base: Path, steps: int, *, batch: int = 16) -> Path:
    """``base``'s GPT-2 fine-tuned for ``steps`` updates on prompt + record + EOS (module
    docstring; AdamW at 1e-3, 3e-4 from width 512), saved beside it once; returns its
    directory. Trains on every core; the timed runs after it keep one thread."""
    import os
    import random

    import transformers

    out = base.with_name(f"{base.name}-records{steps}")
    if (out / "config.json").exists():
        return out
    tok = transformers.AutoTokenizer.from_pretrained(base)
    model = transformers.AutoModelForCausalLM.from_pretrained(base).train()
    lr = 1e-3 if model.config.n_embd < 512 else 3e-4
    threads = torch.get_num_threads()
    torch.set_num_threads(os.cpu_count() or 1)
    eos = model.config.eos_token_id
    rng, opt = random.Random(0), torch.optim.AdamW(model.parameters(), lr=lr)
    torch.manual_seed(0)
    started = time.time()
    for step in range(steps):
        rows = []
        for _ in range(batch):  # the prompt and the record tokenized apart, as generate reads them
            prompt = tok(rng.choice(PROMPTS), add_special_tokens=False)["input_ids"]
            rows.append(prompt + tok(random_record(rng), add_special_tokens=False)["input_ids"] + [eos])
        width = max(map(len, rows))
        ids = torch.tensor([r + [eos] * (width - len(r)) for r in rows])
        labels = torch.tensor([r + [-100] * (width - len(r)) for r in rows])
        loss = model(input_ids=ids, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 10 == 0 or step == steps - 1:
            print(
                f"  training {step + 1}/{steps}: loss {loss.item():.3f} ({time.time() - started:.0f} s)",
                flush=True,
            )
    torch.set_num_threads(threads)
    model.eval().save_pretrained(out)
    tok.save_pretrained(out)
    return out


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
    ap.add_argument("--layers", type=int, default=2, help="of the GPT-2 (a directory per size)")
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument(
        "--train-steps", type=int, default=0, help="fine-tune on the schema's records first (0: random)"
    )
    args = ap.parse_args()
    torch.set_num_threads(1)

    from bench_readme_memory import model_dir

    import decodekit

    directory = model_dir(args.data, args.work, args.cache, args.layers, args.width)
    if args.train_steps:
        directory = trained_dir(directory, args.train_steps)
    lm = decodekit.load_model(directory)
    constraint = decodekit.json_schema(SCHEMA)
    kind = f"trained {args.train_steps} steps on records" if args.train_steps else "random"
    print(f"GPT-2 {args.layers}x{args.width} ({kind}), V = {lm.vocab_size:,}; {json.dumps(SCHEMA)[:60]}...")
    print(f"({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {args.repeats} rounds alternated)\n")
    print(
        "| strategy | tokens | model calls per token: plain / forced tokens / + forced texts drafted "
        "| CPU ms per token: plain / forced tokens / + texts | speed-up | outputs equal: tokens / texts |"
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
        config = dict(
            strategy=strategy, max_length=args.max_length, constraint=constraint, beam_size=4, seed=0
        )
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
        same = " / ".join("yes" if outputs[m] == outputs["plain"] else "no" for m in ("tokens", "texts"))
        shown_calls = " / ".join(f"{calls[m] / tokens:.2f}" for m in modes)
        shown_ms = " / ".join(f"{ms[m]:.1f}" for m in modes)
        speedup = " / ".join(f"{ms['plain'] / ms[m]:.2f}x" for m in ("tokens", "texts"))
        print(
            f"| {strategy} | {tokens} | {shown_calls} | {shown_ms} | {speedup} | {same} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
