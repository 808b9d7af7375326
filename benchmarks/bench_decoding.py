"""Decoder overhead and constrained-search cost, measured side by side in one run.

1. Overhead (issue 2): wall time of a strategy divided by the time of the same number of
   bare ``prefill``/``step`` calls at the same batch sizes on the same model (an untrained
   LSTM LM, 10k vocabulary, 2x200), EOS disabled so every search runs ``--steps`` steps.
2. Constrained cost (issue 3): time per step of Anderson-style search with S live automaton
   states and beam K, divided by plain beam search with beam K*S on the same model.

Timings alternate between the contenders and report medians, since these machines are
shared and noisy; with one thread (the default) they are the process's CPU time, which the
load of other jobs disturbs far less than wall time (``--clock wall`` to change).

    python benchmarks/bench_decoding.py [--threads 1] [--repeats 7]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

import decodekit
from decodekit.models.lstm import LSTMLM, LSTMConfig
from decodekit.vocab import WordVocab


def make_model(vocab_size: int, hidden: int) -> LSTMLM:
    torch.manual_seed(0)
    words = [f"w{i}" for i in range(vocab_size - 2)]
    words[:6] = ["the", "market", "profit", "company", "said", "rose"]
    vocab = WordVocab(["<unk>", "<eos>", *words])
    model = LSTMLM(LSTMConfig(embed=hidden, hidden=hidden, layers=2), vocab).eval()
    return model


class NoEOS:
    """The same model with ``eos_id = None`` (so searches run their full length); counts steps."""

    def __init__(self, model):
        self.model, self.vocab = model, model.vocab
        self.vocab_size, self.bos_id, self.eos_id = model.vocab_size, model.bos_id, None
        self.initial_state, self.prefill = model.initial_state, model.prefill
        self.device = model.device
        self.steps = 0

    def step(self, state, tokens):
        self.steps += 1
        return self.model.step(state, tokens)


@torch.no_grad()
def bare_steps(model, prompts, rows_per_prompt: int, steps: int) -> None:
    """What any decoder must do: prefill the prompts, then ``steps - 1`` steps at B*rows rows."""
    tokens = torch.tensor([[model.bos_id, *p] for p in prompts])
    logprobs, state = model.prefill(model.initial_state(len(prompts)), tokens)
    n = len(prompts) * rows_per_prompt
    state = tuple(s.repeat_interleave(rows_per_prompt, 0) for s in state)
    x = torch.zeros(n, dtype=torch.long)
    for _ in range(steps - 1):
        logprobs, state = model.step(state, x)


CLOCK = time.process_time


def compare(contenders: dict, repeats: int, model: NoEOS | None = None) -> dict[str, float]:
    """Median wall time of each contender, run in alternation; with ``model``, per ``step`` call."""
    times = {k: [] for k in contenders}
    for fn in contenders.values():
        fn()  # warm-up
    for _ in range(repeats):
        for k, fn in contenders.items():
            if model is not None:
                model.steps = 0
            t0 = CLOCK()
            fn()
            elapsed = CLOCK() - t0
            times[k].append(elapsed / max(model.steps, 1) if model is not None else elapsed)
    return {k: statistics.median(v) for k, v in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vocab", type=int, default=10_000)
    ap.add_argument("--hidden", type=int, default=200)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--beam", type=int, default=8)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--skip-constrained", action="store_true")
    ap.add_argument(
        "--clock",
        choices=["cpu", "wall"],
        default=None,
        help="default: cpu time with one thread, wall time with more",
    )
    args = ap.parse_args()
    global CLOCK
    if (args.clock or ("cpu" if args.threads == 1 else "wall")) == "wall":
        CLOCK = time.perf_counter
    torch.set_num_threads(args.threads)
    base = make_model(args.vocab, args.hidden)
    model = NoEOS(base)
    prompts = [[2, 3], [4, 5], [3, 6], [2, 7]][: args.batch]
    k, steps = args.beam, args.steps
    print(
        f"LSTM 2x{args.hidden}, V={args.vocab}, batch {len(prompts)}, {steps} steps, "
        f"{args.threads} thread(s), {'wall' if CLOCK is time.perf_counter else 'CPU'} time, "
        f"median of {args.repeats}"
    )
    t = compare(
        {
            "beam": lambda: decodekit.beam_search(model, prompts, k, steps),
            "bare_beam": lambda: bare_steps(model, prompts, k, steps),
            "greedy": lambda: decodekit.greedy(model, prompts, steps),
            "bare_greedy": lambda: bare_steps(model, prompts, 1, steps),
            "sample": lambda: decodekit.sample(model, prompts, steps, top_p=0.9, generator=0),
        },
        args.repeats,
    )
    print("| strategy | decodekit s | bare steps s | overhead ratio |")
    print("|---|---|---|---|")
    print(
        f"| beam search (K={k}) | {t['beam']:.3f} | {t['bare_beam']:.3f} | {t['beam'] / t['bare_beam']:.3f} |"
    )
    print(f"| greedy | {t['greedy']:.3f} | {t['bare_greedy']:.3f} | {t['greedy'] / t['bare_greedy']:.3f} |")
    print(
        f"| sample (top-p 0.9) | {t['sample']:.3f} | {t['bare_greedy']:.3f} | "
        f"{t['sample'] / t['bare_greedy']:.3f} |"
    )
    if args.skip_constrained:
        return
    from decodekit.constraints import as_automaton

    print("\nConstrained (Anderson) search vs plain beam search with K*S beams, time per step:")
    print("| constraint | S | K | constrained ms/step | beam K*S ms/step | ratio |")
    print("|---|---|---|---|---|---|")
    for pattern, kc in [
        (r".*\bprofit\b.*", 4),
        (r"the (market|company) .*\brose\b.*", 4),
        (r"(w[0-9]+ ){3,6}.*", 2),
    ]:
        automaton = as_automaton(pattern, model)  # the model's EOS (None here), not the vocabulary's
        s = automaton.num_states
        tc = compare(
            {
                "grid": lambda a=automaton, kk=kc: decodekit.constrained_beam_search(
                    model, prompts, a, kk, steps, n_best=1
                ),
                "beam": lambda s=s, kk=kc: decodekit.beam_search(model, prompts, kk * s, steps),
            },
            args.repeats,
            model,
        )
        print(
            f"| `{pattern}` | {s} | {kc} | {1e3 * tc['grid']:.2f} | {1e3 * tc['beam']:.2f} | "
            f"{tc['grid'] / tc['beam']:.3f} |"
        )


if __name__ == "__main__":
    main()
