"""Speculative decoding (decodekit/decoding/speculative.py): target model calls and CPU time per
generated token with and without a draft, greedy, tokens checked identical to plain greedy.

Rows: the bundled PTB LSTM with a perfect draft (the target itself: the mechanism's ceiling), with
a Kneser-Ney n-gram draft (``--arpa``, from ``decodekit ngram --data PTB --order 5``), and with
prompt lookup on a summarisation-like prompt (a PTB passage, then its first words again); then a
tiny random GPT-2 pair through decodekit and through transformers' assisted generation, side by
side (``--no-hf`` skips it). CPU time (``time.process_time``), one torch thread, the contenders
alternated, medians of ``--repeats``. Prints a Markdown table.

    python benchmarks/bench_speculative.py --arpa ptb5.arpa --data ../shared/data/ptb
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's decodekit
import decodekit  # noqa: E402
from decodekit.decoding.speculative import LookupDraft, ModelDraft, speculative_generate
from decodekit.models import base


class Counted:
    """A model whose calls (step, prefill, step_many) are counted; everything else forwarded.
    ``eos=False``: the model never ends (PTB's <eos> is then one more token of a stream)."""

    def __init__(self, model, eos: bool = True):
        self.model, self.calls = model, 0
        self.vocab_size, self.bos_id = model.vocab_size, model.bos_id
        self.eos_id = model.eos_id if eos else None

    def __getattr__(self, name):
        return getattr(self.model, name)

    def step(self, state, tokens):
        self.calls += 1
        return self.model.step(state, tokens)

    def prefill(self, state, tokens):
        self.calls += 1
        return base.prefill(self.model, state, tokens)

    def step_many(self, state, tokens):
        self.calls += 1
        return base.step_many(self.model, state, tokens)


def measure(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return statistics.median(times)


def row(name, target, prompts, max_length, draft, repeats, **fields):
    """Plain greedy vs speculative greedy on ``prompts``: one Markdown table row."""
    counted = Counted(target)
    config = decodekit.GenerationConfig(strategy="greedy", max_length=max_length, **fields)
    plain = [decodekit.generate(counted, p, max_length=max_length)[0].tokens for p in prompts]
    plain_calls, counted.calls = counted.calls, 0
    spec, search = speculative_generate(counted, prompts, config, draft)
    assert [h[0].tokens for h in spec] == plain, f"{name}: tokens differ from plain greedy"
    generated = sum(len(t) for t in plain)
    t_plain = t_spec = 0.0
    for _ in range(repeats):  # alternated
        t_plain += measure(lambda: [decodekit.generate(target, p, max_length=max_length) for p in prompts], 1)
        t_spec += measure(
            lambda: speculative_generate(target, prompts, config, type(draft)(*draft_args(draft))), 1
        )
    accept = search.kept / max(search.drafted, 1)
    return (
        f"| {name} | {generated} | {accept:.2f} | {plain_calls / generated:.2f} "
        f"| {counted.calls / generated:.2f} | {draft.calls / generated:.2f} "
        f"| {1000 * t_plain / repeats / generated:.2f} "
        f"| {1000 * t_spec / repeats / generated:.2f} | {t_plain / t_spec:.2f}x | yes |"
    )


def draft_args(draft):
    return (draft.model,) if isinstance(draft, ModelDraft) else (draft.max_ngram,)


def hf_pair(repeats: int, max_new: int) -> list[str]:
    """A tiny random GPT-2 pair: decodekit's speculative greedy vs transformers' assisted generation."""
    import transformers

    from decodekit.models.hf import HuggingFaceLM

    def gpt2(layers, width, seed):
        torch.manual_seed(seed)
        cfg = transformers.GPT2Config(
            vocab_size=2000, n_positions=256, n_embd=width, n_layer=layers, n_head=4, eos_token_id=1999,
            bos_token_id=1999, pad_token_id=1999,
        )  # fmt: skip
        return transformers.GPT2LMHeadModel(cfg).eval()

    big, small = gpt2(6, 256, 0), gpt2(1, 64, 1)
    target, draft = HuggingFaceLM(big), HuggingFaceLM(small)
    prompt = torch.randint(0, 1999, (1, 24), generator=torch.Generator().manual_seed(0))
    config = decodekit.GenerationConfig(strategy="greedy", max_length=max_new, num_assistant_tokens=5)
    ours, search = speculative_generate(target, [prompt[0].tolist()], config, ModelDraft(draft))
    options = dict(max_new_tokens=max_new, min_new_tokens=max_new, do_sample=False, pad_token_id=1999)
    with torch.no_grad():
        theirs = big.generate(
            prompt, assistant_model=small, num_assistant_tokens=5, num_assistant_tokens_schedule="constant",
            **options,
        )[0, 24:].tolist()  # fmt: skip
        plain = big.generate(prompt, **options)[0, 24:].tolist()
    same = list(ours[0][0].tokens) == theirs[: len(ours[0][0].tokens)] == plain[: len(ours[0][0].tokens)]
    n = len(ours[0][0].tokens)
    times = {"dk": 0.0, "dk-spec": 0.0, "hf": 0.0, "hf-spec": 0.0}
    for _ in range(repeats):
        times["dk"] += measure(lambda: decodekit.generate(target, prompt[0].tolist(), max_length=max_new), 1)
        times["dk-spec"] += measure(
            lambda: speculative_generate(target, [prompt[0].tolist()], config, ModelDraft(draft)), 1
        )
        with torch.no_grad():
            times["hf"] += measure(lambda: big.generate(prompt, **options), 1)
            times["hf-spec"] += measure(
                lambda: big.generate(
                    prompt, assistant_model=small, num_assistant_tokens=5,
                    num_assistant_tokens_schedule="constant", **options,
                ),
                1,
            )  # fmt: skip
    ms = {k: 1000 * v / repeats / n for k, v in times.items()}
    accept = search.kept / max(search.drafted, 1)
    return [
        f"| GPT-2 6x256 / draft 1x64 (random), decodekit | {n} | {accept:.2f} | 1.00 | "
        f"{search.calls / n:.2f} | {search.draft.calls / n:.2f} | {ms['dk']:.2f} | {ms['dk-spec']:.2f} | "
        f"{ms['dk'] / ms['dk-spec']:.2f}x | {'yes' if same else 'NO'} |",
        f"| same pair, transformers assisted generation | {n} | | | | | {ms['hf']:.2f} | {ms['hf-spec']:.2f} "
        f"| {ms['hf'] / ms['hf-spec']:.2f}x | {'yes' if same else 'NO'} |",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arpa", type=Path, help="a Kneser-Ney ARPA file over the PTB vocabulary")
    parser.add_argument("--data", type=Path, help="the PTB directory (ptb.valid.txt: the prompts)")
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--max-length", type=int, default=48)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-hf", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    lstm = Counted(decodekit.load_model(), eos=False)  # 48 tokens of a stream, not one sentence
    vocab = lstm.vocab
    if args.data is not None:
        lines = (args.data / "ptb.valid.txt").read_text().splitlines()
    else:
        lines = ["the company said it expects to report a loss for the third quarter"] * args.prompts
    sentences = [line.strip() for line in lines if len(line.split()) >= 12][: args.prompts]
    prompts = [vocab.encode(s) for s in sentences]
    print("| model and draft | tokens | acceptance | target calls/token, plain | speculative "
          "| draft calls/token | ms/token plain | ms/token speculative | speed-up "
          "| tokens identical |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|")
    print(row("PTB LSTM, perfect draft (itself), k=5", lstm, prompts, args.max_length, ModelDraft(lstm.model),
              args.repeats, num_assistant_tokens=5))  # fmt: skip
    if args.arpa is not None:
        from decodekit.models import read_arpa

        kn = read_arpa(args.arpa, vocab=vocab)
        for k in (2, None):
            name = f"PTB LSTM, KN {kn.order}-gram draft, k={k or 'adaptive'}"
            print(
                row(
                    name, lstm, prompts, args.max_length, ModelDraft(kn), args.repeats, num_assistant_tokens=k
                )
            )
    # summarisation-like: a passage, then "in summary" and its opening words: the output copies it
    passage = " ".join(sentences[:3])
    summary = [vocab.encode(f"{passage} <eos> in summary {' '.join(passage.split()[:4])}")]
    print(row("PTB LSTM, prompt lookup (passage then its opening), n=8", lstm, summary, args.max_length,
              LookupDraft(), args.repeats, prompt_lookup_num_tokens=8))  # fmt: skip
    if not args.no_hf:
        for line in hf_pair(args.repeats, 64):
            print(line)


if __name__ == "__main__":
    main()
