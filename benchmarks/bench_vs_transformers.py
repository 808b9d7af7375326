"""decodekit through :class:`~decodekit.models.hf.HuggingFaceLM` side by side with
``transformers``' own ``model.generate`` on the same randomly initialised GPT-2 (CPU).

Same model, same prompts, EOS disabled (every output is ``--new`` tokens long):

1. identical token ids: greedy, beam search (``--beams``), sampling under the same seed
   (``torch.manual_seed`` then both draw with ``torch.multinomial`` from the global generator);
2. time ratio decodekit / transformers, medians of alternating runs, in wall seconds and in CPU
   seconds of this process (``--threads 1``: the CPU time is the work itself, unaffected by other
   jobs on a shared machine, which stretch wall time);
3. constrained decoding: a regex that forces a word somewhere, with decodekit's
   ``constrained_beam_search`` vs what the installed transformers offers.

    python benchmarks/bench_vs_transformers.py [--threads 1] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch
from markdown_tables import markdown_table

import decodekit
import decodekit.constraints
from decodekit.models.hf import HuggingFaceLM


def make_model(vocab_size: int, width: int, layers: int, seed: int):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    config = GPT2Config(
        vocab_size=vocab_size, n_positions=256, n_embd=width, n_layer=layers, n_head=4,
        bos_token_id=0, eos_token_id=0,
    )  # fmt: skip
    return GPT2LMHeadModel(config).eval()


def make_tokenizer(data: Path, vocab_size: int):
    """A byte-level BPE with ``vocab_size`` tokens trained on PTB's training text (for the regex)."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import PreTrainedTokenizerFast

    lines = [line.strip() for line in (data / "ptb" / "ptb.train.txt").read_text().splitlines()]
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(
        lines, vocab_size=vocab_size, special_tokens=["<|endoftext|>"], show_progress=False
    )
    return PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer, eos_token="<|endoftext|>")


def hf_generate(model, prompts: torch.Tensor, new: int, **kw) -> torch.Tensor:
    out = model.generate(
        prompts, attention_mask=torch.ones_like(prompts), max_new_tokens=new, min_new_tokens=0,
        eos_token_id=None, pad_token_id=0, **kw,
    )  # fmt: skip
    return out[:, prompts.shape[1] :]


def contenders(lm, model, prompts: torch.Tensor, new: int, beams: list[int]):
    """name -> (decodekit fn, transformers fn); each returns token ids [rows, new] as a list."""
    p = prompts.tolist()

    def ours_sample(k=50):
        torch.manual_seed(1234)
        return [h.tokens for hs in decodekit.sample(lm, p, new, top_k=k) for h in hs]

    def theirs_sample(k=50):
        torch.manual_seed(1234)
        return hf_generate(
            model, prompts, new, do_sample=True, top_k=k or 0, top_p=1.0, temperature=1.0
        ).tolist()

    table = {
        "greedy": (
            lambda: [h[0].tokens for h in decodekit.greedy(lm, p, new)],
            lambda: hf_generate(model, prompts, new, do_sample=False, num_beams=1).tolist(),
        ),
        "sample (top-k 50)": (ours_sample, theirs_sample),
        "sample (pure)": (lambda: ours_sample(None), lambda: theirs_sample(None)),
    }
    for k in beams:
        table[f"beam {k}"] = (
            lambda k=k: [h[0].tokens for h in decodekit.beam_search(lm, p, k, new, length_penalty=1.0)],
            lambda k=k: hf_generate(model, prompts, new, do_sample=False, num_beams=k).tolist(),
        )
    return table


def time_pair(ours, theirs, repeats: int) -> dict[str, tuple[list[float], list[float]]]:
    """Wall and CPU seconds of each run, runs alternating (the machine is shared and noisy)."""
    wall: tuple[list[float], list[float]] = ([], [])
    cpu: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeats):
        for i, fn in enumerate((ours, theirs)):
            t0, c0 = time.perf_counter(), time.process_time()
            fn()
            wall[i].append(time.perf_counter() - t0)
            cpu[i].append(time.process_time() - c0)
    return {"wall": wall, "cpu": cpu}


def constrained_report(args, model) -> None:
    """Force the word ``args.word`` somewhere in the continuation."""
    tok = make_tokenizer(Path(args.data), args.vocab)
    lm = HuggingFaceLM(model, tok)
    lm.eos_id = None
    pattern = rf"[^\n]* {args.word}( [^\n]*)?"
    gen = torch.Generator().manual_seed(args.seed + 1)
    prompts = torch.randint(1, args.vocab, (args.batch, args.prompt), generator=gen)
    word_ids = tok.encode(" " + args.word)
    print(f"\nconstraint {pattern!r}; ' {args.word}' = token ids {word_ids}")
    try:
        hf_generate(model, prompts, args.new_constrained, num_beams=args.cbeam, force_words_ids=[word_ids])
        offered = "force_words_ids works"
    except Exception as e:  # noqa: BLE001 -- report whatever the installed version does
        offered = f"force_words_ids -> {type(e).__name__}: {str(e).splitlines()[0][:150]}"
    print(f"transformers {__import__('transformers').__version__}: {offered}")
    rows = []
    t0 = time.perf_counter()
    ours = decodekit.constrained_beam_search(lm, prompts.tolist(), pattern, args.cbeam, args.new_constrained)
    rows.append(
        ("decodekit constrained_beam_search", [h[0] if h else None for h in ours], time.perf_counter() - t0)
    )
    t0 = time.perf_counter()
    masked = decodekit.beam_search(lm, prompts.tolist(), args.cbeam, args.new_constrained, constraint=pattern)
    rows.append(
        ("decodekit beam_search(constraint=) masked", [h[0] for h in masked], time.perf_counter() - t0)
    )
    t0 = time.perf_counter()
    plain = hf_generate(model, prompts, args.new_constrained, num_beams=args.cbeam, do_sample=False)
    secs = time.perf_counter() - t0
    rows.append(
        (
            "transformers beam search, no constraint",
            [_hyp(lm, prompts[i], plain[i]) for i in range(len(plain))],
            secs,
        )
    )
    automaton = decodekit.constraints.as_automaton(pattern, lm)
    plen, total = prompts.shape[1], args.new_constrained

    def allowed_tokens(batch_id: int, input_ids: torch.Tensor) -> list[int]:
        """transformers' in-library tool: a per-row callback returning the allowed next ids."""
        q = torch.tensor([automaton.initial])
        for x in input_ids[plen:].tolist():
            q = automaton.step(q, torch.tensor([x]))
        rem = total - (input_ids.shape[0] - plen)
        return automaton.allowed(q, rem)[0].nonzero()[:, 0].tolist() or [0]

    t0 = time.perf_counter()
    fenced = hf_generate(
        model, prompts, total, num_beams=args.cbeam, do_sample=False, prefix_allowed_tokens_fn=allowed_tokens
    )
    secs = time.perf_counter() - t0
    rows.append(
        (
            "transformers beam + prefix_allowed_tokens_fn",
            [_hyp(lm, prompts[i], fenced[i]) for i in range(len(fenced))],
            secs,
        )
    )
    same = sum(list(h[0].tokens) == f for h, f in zip(masked, fenced.tolist()))
    print(f"decodekit masked beam == transformers beam + prefix_allowed_tokens_fn: {same}/{len(masked)} rows")
    print(f"{'method':>44} {'success':>8} {'mean logprob':>13} {'seconds':>8}")
    for name, hyps, secs in rows:
        texts = [tok.decode(h.tokens) if h is not None else "" for h in hyps]
        ok = [h is not None and f" {args.word}" in t for h, t in zip(hyps, texts)]
        lps = [h.logprob for h in hyps if h is not None]
        print(f"{name:>44} {sum(ok):>4}/{len(ok):<3} {statistics.mean(lps):>13.2f} {secs:>8.2f}")


def _hyp(lm, prompt: torch.Tensor, tokens: torch.Tensor):
    """A Hypothesis-like record with the model's log-probability of ``tokens`` after ``prompt``."""
    from decodekit.outputs import Hypothesis

    lp, state = lm.prefill(lm.initial_state(1), prompt.view(1, -1))
    total = 0.0
    for x in tokens.tolist():
        total += float(lp[0, x])
        lp, state = lm.step(state, torch.tensor([x]))
    return Hypothesis(tuple(tokens.tolist()), total, total, False)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--data", default="../shared/data", help="for the BPE of the constrained part (PTB train)"
    )
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--vocab", type=int, default=10_000)
    ap.add_argument("--width", type=int, default=128)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--prompt", type=int, default=16, help="prompt length (tokens)")
    ap.add_argument("--new", type=int, default=64)
    ap.add_argument("--beams", type=int, nargs="*", default=[4, 8])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--word", default="market")
    ap.add_argument("--cbeam", type=int, default=4)
    ap.add_argument("--new-constrained", type=int, default=24)
    ap.add_argument("--skip-constrained", action="store_true")
    ap.add_argument("--markdown", action="store_true", help="end with docs/benchmarks.md's table")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    import transformers

    model = make_model(args.vocab, args.width, args.layers, args.seed)
    lm = HuggingFaceLM(model)
    lm.eos_id = None
    gen = torch.Generator().manual_seed(args.seed)
    prompts = torch.randint(1, args.vocab, (args.batch, args.prompt), generator=gen)
    print(
        f"GPT-2 {args.layers}x{args.width}, vocab {args.vocab}, batch {args.batch} x prompt {args.prompt}, "
        f"{args.new} new tokens, EOS off; torch {torch.__version__}, "
        f"transformers {transformers.__version__}, "
        f"{args.threads} thread(s), medians of {args.repeats} alternating runs"
    )
    print(
        f"{'strategy':>18} {'identical':>10} {'dk wall s':>10} {'tf wall s':>10} {'ratio':>6}"
        f" {'dk CPU s':>9} {'tf CPU s':>9} {'ratio':>6}"
    )
    table = []
    for name, (ours, theirs) in contenders(lm, model, prompts, args.new, args.beams).items():
        a, b = ours(), theirs()
        same = sum(list(x) == list(y) for x, y in zip(a, b))
        times = time_pair(ours, theirs, args.repeats)
        (wa, wb), (ca, cb) = ([statistics.median(v) for v in times[k]] for k in ("wall", "cpu"))
        print(
            f"{name:>18} {same:>6}/{len(a):<3} {wa:>10.3f} {wb:>10.3f} {wa / wb:>6.2f}"
            f" {ca:>9.3f} {cb:>9.3f} {ca / cb:>6.2f}"
        )
        table.append((name, f"{same}/{len(a)}", f"**{ca / cb:.2f}**"))
    if args.markdown:
        header = ("strategy", "identical outputs", "decodekit / transformers (CPU)")
        print("\n" + markdown_table(header, table))
    if not args.skip_constrained:
        constrained_report(args, model)


if __name__ == "__main__":
    main()
