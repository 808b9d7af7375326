"""Lexically constrained generation (a CommonGen-like task from PTB): the banked search against
unconstrained beam search, masked beam search and the per-state grid, side by side in one run.

Task: sets of 2-4 content words drawn from held-out PTB sentences (ptb.test.txt), "generate a
sentence containing all of them": one constraint ``.*\\bword\\b.*`` per word, all of which must
match. Two models: the bundled PTB LSTM (a word a token) and a small LSTM over a byte-level BPE
vocabulary trained here on PTB (``tokenizers``; words span several tokens), both cached under
``--cache``. Strategies at the same width K: ``beam`` (no constraint), ``masked-beam``, the
grid (``beam`` under the constraint: S*K rows, run where S*K <= ``--grid-rows``) and
``banked-beam``.

Per strategy and model: coverage (share of outputs containing every word as a word), average
log-probability per token under the model, perplexity of the outputs under an independent KN5
(decodekit's Kneser-Ney on PTB train words), seconds and peak resident-memory growth per
sentence (the first run: compiling the constraint included), rows per step, and seconds per step
against plain beam search (a second run, the constraint compiled; one thread, CPU time). Then
rows per step for 1-4 words and for ``.*\\bmarket\\b.*`` on the BPE model, and the choice
rule's measurement: grid vs banked seconds per step against S*K*V.

    python benchmarks/bench_lexical.py [--data ../shared/data/ptb] [--cache runs/lexical]
        [--sets 6] [--beam 4] [--threads 1] [--json out.json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import re
import statistics
import sys
import threading
import time
from pathlib import Path

import torch

from decodekit.decoding.banked import BANKED
from decodekit.decoding.beam import ANDERSON, BEAM, MASKED_BEAM
from decodekit.decoding.plan import plan
from decodekit.decoding.search import run
from decodekit.decoding.strategies import Settings

_STOP_LINES = (
    "the a an and or but of to in on at for with from by as is are was were be been being has have had",
    "that this these those it its it's he she they them their his her we our you your i not no n't 's",
    "will would could should may might can also than then more most said says say about into over after",
    "before under new one two three which who whom what when where there here some any all other such",
    "only very just like year years million billion last first company companies share shares",
)
STOP = frozenset(word for line in _STOP_LINES for word in line.split())


# ---------------------------------------------------------------- data and word sets


def read_lines(data: Path, split: str) -> list[str]:
    return [line.strip() for line in (data / f"ptb.{split}.txt").read_text().splitlines() if line.strip()]


def word_sets(data: Path, count: int, seed: int, common: set[str]) -> list[list[str]]:
    """``count`` sets of 2, 3, 4, 2, ... content words, each from one held-out sentence."""
    rng = random.Random(seed)
    sentences = read_lines(data, "test")
    rng.shuffle(sentences)
    out = []
    for s in sentences:
        size = 2 + len(out) % 3
        words = list(dict.fromkeys(w for w in s.split() if re.fullmatch(r"[a-z]{4,}", w) and w not in STOP))
        words = [w for w in words if w in common]
        if len(words) >= size:
            out.append(sorted(rng.sample(words, size)))
        if len(out) == count:
            break
    return out


def constraint_of(words: list[str]) -> tuple[str, ...]:
    return tuple(rf".*\b{w}\b.*" for w in words)


def covers(text: str, words: list[str]) -> bool:
    return all(re.search(rf"\b{w}\b", text) for w in words)


# ---------------------------------------------------------------- models


def ptb_lstm():
    from decodekit.loading import load_model

    return load_model(None)


def bpe_lstm(data: Path, cache: Path, size: int, seconds: float, seed: int):
    """A byte-level BPE of ``size`` tokens trained on PTB train (its ``<unk>`` left out), and a
    1x256 LSTM trained on it for about ``seconds`` of CPU (cached: the tokenizer JSON and the
    weights)."""
    import tokenizers
    import transformers

    from decodekit.models.hf import HFVocab
    from decodekit.models.lstm import LSTMLM, LSTMConfig

    # without PTB's "<unk>" (spelled in bytes it is the likeliest phrase: beams fill with it)
    lines = [" ".join(w for w in line.split() if w != "<unk>") for line in read_lines(data, "train")]
    lines = [line for line in lines if line]
    tag = f"no-unk|{size}|{seconds}|{seed}|{len(lines)}|{lines[0]}|{lines[-1]}"
    key = hashlib.sha256(tag.encode()).hexdigest()[:12]
    cache.mkdir(parents=True, exist_ok=True)
    tok_path, weights = cache / f"ptb-bpe-{size}-{key}.json", cache / f"ptb-bpe-lstm-{key}.pt"
    if not tok_path.exists():
        trained = tokenizers.ByteLevelBPETokenizer()
        trained.train_from_iterator(lines, vocab_size=size, min_frequency=2, special_tokens=["<|endoftext|>"])
        trained.save(str(tok_path))
    raw = tokenizers.Tokenizer.from_file(str(tok_path))
    tok = transformers.PreTrainedTokenizerFast(
        tokenizer_object=raw, eos_token="<|endoftext|>", bos_token="<|endoftext|>"
    )
    vocab = HFVocab(tok, len(tok))
    torch.manual_seed(seed)
    model = LSTMLM(LSTMConfig(embed=128, hidden=256, layers=1, init_range=0.05), vocab)
    if weights.exists():
        model.load_state_dict(torch.load(weights))
    else:
        eos = vocab.eos_id
        ids = []
        for line in lines:
            ids += [*raw.encode(line).ids, eos]
        stream = torch.tensor(ids)
        batch, bptt = 32, 35
        usable = stream[: len(stream) // batch * batch].view(batch, -1)
        opt = torch.optim.Adam(model.parameters(), lr=3e-3)
        start, pos, state, steps = time.process_time(), 0, None, 0
        while time.process_time() - start < seconds:
            if pos + bptt + 1 > usable.shape[1]:
                pos, state = 0, None
            x, y = usable[:, pos : pos + bptt], usable[:, pos + 1 : pos + bptt + 1]
            logits, state = model(x, state)
            state = tuple(s.detach() for s in state)
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25 * 20)
            opt.step()
            pos, steps = pos + bptt, steps + 1
        print(
            f"trained the BPE LSTM: {steps} steps x {batch * bptt} tokens in "
            f"{time.process_time() - start:.0f} s CPU, last loss {loss.item():.2f}",
            flush=True,
        )
        torch.save(model.state_dict(), weights)
    model.eval()
    return model


def kn5(data: Path):
    from decodekit.data import load_corpus
    from decodekit.models import train_kneser_ney

    corpus = load_corpus(data)
    ids = corpus.train.tolist() if hasattr(corpus.train, "tolist") else list(corpus.train)
    return train_kneser_ney(ids, 5, len(corpus.vocab), corpus.vocab.eos_id, vocab=corpus.vocab)


def kn5_ppl(lm, texts: list[str]) -> float:
    from decodekit.training import evaluate

    vocab, ids = lm.vocab, []
    unk = vocab.index.get("<unk>")
    for t in texts:
        ids += [vocab.index.get(w, unk) for w in t.split()] + [vocab.eos_id]
    return evaluate(lm, ids).ppl if ids else math.nan


# ---------------------------------------------------------------- measuring


class PeakRSS:
    """The peak resident set size growth while in the block, sampled every 5 ms by a thread (the
    timings are the main thread's CPU time, which the sampling does not count)."""

    def __init__(self) -> None:
        self.page = os.sysconf("SC_PAGE_SIZE")

    def rss(self) -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * self.page

    def __enter__(self):
        self.base = self.peak = self.rss()
        self.stop = threading.Event()

        def sample():
            while not self.stop.wait(0.005):
                self.peak = max(self.peak, self.rss())

        self.thread = threading.Thread(target=sample, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()
        self.peak = max(self.peak, self.rss())
        self.growth = self.peak - self.base


def decode(model, strategy, constraint, beam: int, max_length: int):
    """(hypothesis or None, CPU seconds, rows per step (max), steps, peak RSS growth)."""
    settings = Settings(strategy, max_length, constraint, beam_size=beam, length_penalty=1.0, n_best=1)
    rows, t0 = [], time.thread_time()
    with PeakRSS() as mem:
        observe = lambda sel: rows.append(sel.logprob.shape[0])  # noqa: E731
        hyps = run(plan(model, [[]], settings), observe=observe)[0]
    seconds = time.thread_time() - t0
    return (hyps[0] if hyps else None), seconds, max(rows, default=0), len(rows), mem.growth


def grid_states(model, constraint) -> int | None:
    from decodekit.constraints import ConstraintError, anderson_automaton

    try:
        return anderson_automaton(constraint, model).num_states
    except ConstraintError:
        return None


# ---------------------------------------------------------------- the runs


def evaluate_model(name, model, sets, lm, args, max_length) -> list[dict]:
    print(f"\n## {name}: V = {model.vocab_size:,}, K = {args.beam}, max_length = {max_length}", flush=True)
    out = []
    for words in sets:
        constraint = constraint_of(words)
        states = grid_states(model, constraint)
        contenders = [("beam", BEAM, None, args.beam), ("masked-beam", MASKED_BEAM, constraint, args.beam)]
        contenders.append(("banked-beam", BANKED, constraint, args.beam))
        if states is not None and states * args.beam <= args.grid_rows:
            contenders.append(("grid", ANDERSON, constraint, args.beam))
            contenders.append(("banked, K = S*K", BANKED, constraint, states * args.beam))
        for label, strategy, c, width in contenders:
            h, seconds, rows, steps, mem = decode(model, strategy, c, width, max_length)  # compiles
            warm = decode(model, strategy, c, width, max_length)[1] if seconds < 10 else seconds
            text = model.vocab.decode(h.tokens) if h is not None else ""
            out.append(
                dict(
                    model=name,
                    words=words,
                    strategy=label,
                    states=states,
                    found=h is not None,
                    covered=h is not None and covers(text, words),
                    logprob_per_token=(h.logprob / (len(h.tokens) + h.finished)) if h is not None else None,
                    text=text,
                    seconds=seconds,
                    rows=rows,
                    steps=steps,
                    seconds_per_step=warm / max(steps, 1),
                    rss=mem,
                )
            )
            print(
                f"  {','.join(words):40s} {label:16s} S={states} rows={rows:5d} {seconds:7.2f}s "
                f"cov={out[-1]['covered']!s:5s} {text[:70]!r}",
                flush=True,
            )
    summarise(name, out, lm)
    return out


def summarise(name, results, lm) -> None:
    print(
        f"\n| {name} | sets | coverage | logprob / token | KN5 ppl | s / sentence | peak RSS + MB | "
        "rows / step | s / step vs beam (warm) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    beam_step = statistics.mean(r["seconds_per_step"] for r in results if r["strategy"] == "beam")
    for label in ("beam", "masked-beam", "banked-beam", "grid", "banked, K = S*K"):
        rs = [r for r in results if r["strategy"] == label]
        if not rs:
            continue
        found = [r for r in rs if r["found"]]
        lp = statistics.mean(r["logprob_per_token"] for r in found) if found else math.nan
        ppl = kn5_ppl(lm, [r["text"] for r in found])
        print(
            f"| {label} | {len(rs)} | {100 * sum(r['covered'] for r in rs) / len(rs):.0f} % | {lp:.3f} | "
            f"{ppl:.1f} | "
            f"{statistics.mean(r['seconds'] for r in rs):.2f} | {max(r['rss'] for r in rs) / 2**20:.0f} | "
            f"{statistics.mean(r['rows'] for r in rs):.0f} | "
            f"{statistics.mean(r['seconds_per_step'] for r in rs) / beam_step:.2f}x |"
        )
    grid = {tuple(r["words"]): r for r in results if r["strategy"] == "grid" and r["found"]}
    banked = {tuple(r["words"]): r for r in results if r["strategy"] == "banked-beam"}
    both = [w for w in grid if banked[w]["found"]]
    if grid:
        gap = statistics.mean(banked[w]["logprob_per_token"] - grid[w]["logprob_per_token"] for w in both)
        print(
            f"\nwhere the grid ran ({len(grid)} sets): the banked search found a match on {len(both)}; "
            f"its log-probability per token minus the grid's: {gap:+.3f} on average "
            f"(worst {min(banked[w]['logprob_per_token'] - grid[w]['logprob_per_token'] for w in both):+.3f})"
        )


def rows_table(model, args, common_words) -> None:
    """Rows per step of the grid (S*K, from the automaton) and the banked search (K, run)."""
    print(f"\n| constraint (BPE model, K = {args.beam}) | states S | grid rows / step | banked rows / step |")
    print("|---|---|---|---|")
    cases = [
        (f"{n} words: {' '.join(common_words[:n])}", constraint_of(common_words[:n])) for n in range(1, 5)
    ]
    cases.append((r"`.*\bmarket\b.*`", (r".*\bmarket\b.*",)))
    for label, c in cases:
        states = grid_states(model, c)
        _, _, rows, _, _ = decode(model, BANKED, c, args.beam, 12)
        grid = f"{states * args.beam:,}" if states is not None else "refused"
        print(f"| {label} | {states if states is not None else 'too large'} | {grid} | {rows} |", flush=True)


def rule_table(model, name, sets, args, max_length) -> None:
    """The choice rule's measurement: seconds per step of the grid and the banked search, by S*K*V."""
    print(f"\n| {name}: words | S | S*K*V | grid s/step | banked s/step | grid / banked |")
    print("|---|---|---|---|---|---|")
    for words in sets:
        c = constraint_of(words)
        states = grid_states(model, c)
        if states is None or states * args.beam > args.grid_rows:
            continue
        _, gs, _, gsteps, _ = decode(model, ANDERSON, c, args.beam, max_length)
        _, bs, _, bsteps, _ = decode(model, BANKED, c, args.beam, max_length)
        g, b = gs / max(gsteps, 1), bs / max(bsteps, 1)
        entries = states * args.beam * model.vocab_size
        print(f"| {' '.join(words)} | {states} | {entries:,} | {g:.4f} | {b:.4f} | {g / b:.1f} |", flush=True)


def cli_demo(args) -> None:
    """``decodekit generate ... --constraint '.*\\bprofit\\b.*'`` (the README's command) on a
    random 2-layer GPT-2 over the 50,000-token byte-level BPE of bench_byte_patterns (trained
    and cached there): the default strategy against greedy, CPU time and peak memory of the
    whole command (imports included)."""
    import resource
    import subprocess

    import transformers
    from bench_byte_patterns import byte_bpe

    _, tok, _, _ = byte_bpe(args.data.parent, cache=args.bpe_cache, verbose=False)
    where = args.cache / "gpt2-tiny"
    if not (where / "config.json").exists():
        torch.manual_seed(0)
        config = transformers.GPT2Config(
            vocab_size=len(tok), n_positions=256, n_embd=64, n_layer=2, n_head=2,
            bos_token_id=tok.eos_token_id, eos_token_id=tok.eos_token_id,
        )  # fmt: skip
        transformers.GPT2LMHeadModel(config).save_pretrained(where)
        tok.save_pretrained(where)
    print(f"\n| `decodekit generate` on a random GPT-2 (V = {len(tok):,}) | CPU s | peak RSS MB | output |")
    print("|---|---|---|---|")
    for extra in ([], ["--strategy", "greedy"]):
        cmd = [sys.executable, "-m", "decodekit", "generate", "the company said", "--hf-model", str(where)]
        cmd += ["--constraint", r".*\bprofit\b.*", *extra]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        done = subprocess.run(cmd, capture_output=True, text=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        shown = (done.stdout.strip() or done.stderr.strip())[-60:]
        print(
            f"| {' '.join(extra) or 'default'} | {cpu:.1f} | {after.ru_maxrss / 1024:.0f} | {shown!r} |",
            flush=True,
        )


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=Path("../shared/data/ptb"))
    ap.add_argument("--cache", type=Path, default=Path("runs/lexical"))
    ap.add_argument("--sets", type=int, default=6)
    ap.add_argument("--beam", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--bpe-size", type=int, default=2000)
    ap.add_argument("--train-seconds", type=float, default=120.0)
    ap.add_argument("--grid-rows", type=int, default=3000, help="run the grid only up to S*K rows")
    ap.add_argument("--models", nargs="+", default=["ptb", "bpe"], choices=["ptb", "bpe"])
    ap.add_argument("--json", type=Path)
    ap.add_argument("--cli-demo", action="store_true", help="also time the README's command on a GPT-2")
    ap.add_argument("--bpe-cache", type=Path, default=None, help="bench_byte_patterns' BPE cache")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    print("$ python benchmarks/bench_lexical.py " + " ".join(sys.argv[1:]), flush=True)
    lm = kn5(args.data)
    common = {w for w, n in count_words(args.data).items() if n >= 20}
    sets = word_sets(args.data, args.sets, args.seed, common)
    results = []
    if "ptb" in args.models:
        model = ptb_lstm()
        sets_ptb = [[w for w in s if w in model.vocab.index] for s in sets]
        results += evaluate_model("PTB LSTM", model, sets_ptb, lm, args, 25)
        rule_table(model, "PTB LSTM", sets_ptb, args, 25)
    if "bpe" in args.models:
        model = bpe_lstm(args.data, args.cache, args.bpe_size, args.train_seconds, args.seed)
        results += evaluate_model("BPE LSTM", model, sets, lm, args, 40)
        rows_table(model, args, ["market", "stock", "prices", "trading"])
        rule_table(model, "BPE LSTM", sets, args, 40)
    if args.cli_demo:
        cli_demo(args)
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1))


def count_words(data: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    for line in read_lines(data, "train"):
        for w in line.split():
            counts[w] = counts.get(w, 0) + 1
    return counts


if __name__ == "__main__":
    main()
