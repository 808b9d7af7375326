"""Regex -> token automaton build time: decodekit vs outlines-core, side by side (issue 3).

Vocabularies:
  * ``ptb-words``: the 10k PTB word vocabulary (``ptb.train.txt``), word-level, separator " ".
    outlines-core gets each word with a leading space (" the") and the pattern ``" (?:R)"``:
    its text is " w1 w2 ...", ours is "w1 w2 ...", so both accept the same token sequences.
  * ``bpe-50k``: 50,000 BPE-like strings built deterministically from PTB and tinyshakespeare
    (printable ASCII, 2-3 digit numbers, frequent words with and without a leading space, and
    frequent word pieces), concatenated (separator "").
  * ``bpe-bytes``: a real byte-level BPE (``tokenizers.ByteLevelBPETokenizer``, 50,000 tokens
    with EOS, all 256 single bytes, trained and cached by ``bench_byte_patterns.byte_bpe``); both
    libraries get each token's bytes (decodekit via ``HFVocab.surface_bytes()``, outlines-core
    as ``bytes`` keys of its ``Vocabulary``), concatenated.

decodekit is timed cold (automaton cache cleared; the vocabulary's trie, like outlines-core's
``Vocabulary`` object, prepared once beforehand; the table also shows one fully cold build
including that preparation). The token strings are passed as one tuple, the same object on
every call. decodekit recognises a vocabulary by a fingerprint (its length and a hash of 256
evenly spaced tokens) confirmed by comparing all the tokens, at once when it is the same tuple
(a list is copied into a tuple and compared on every call: a little more for 10k strings, see
``--list``). outlines-core does not support ``\\b``; it gets the equivalent
``(?:.*[^\\w\\n])?market(?:[^\\w\\n].*)?``.
Over ``--repeats`` runs, alternating between the two, each with the garbage collector paused
(as ``timeit`` does): the median wall time and the minimum CPU time (process time; both
libraries build on one thread, and on a loaded shared machine CPU time is the steadier measure).

    python benchmarks/bench_automaton.py [--data ../shared/data] [--repeats 9] [--threads 1]
        [--only ptb-words|bpe-50k|bpe-bytes] [--patterns email date ...] [--list] [--cache DIR]
"""

from __future__ import annotations

import argparse
import collections
import gc
import statistics
import string
import sys
import time
from pathlib import Path

import torch

from decodekit.constraints import ConstraintError, clear_cache, compile_regex
from decodekit.vocab import WordVocab

PATTERNS = {
    "email": r"[a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,}",
    "date": r"[0-9]{4}-[0-9]{2}-[0-9]{2}",
    "market": r".*\bmarket\b.*",
    "lower40": r"[a-z ]{0,40}",
    "sentence": r"(the|a) [a-z]+ (is|was|rose|fell) [a-z ]+\.",
    "number": r"-?[0-9]+(\.[0-9]+)?( (million|billion))?",
    "title": r"(mr\.|mrs\.|ms\.) [a-z]+( [a-z]+){0,3}",
}
NO_WORD_BOUNDARY = {"market": r"(?:.*[^\w\n])?market(?:[^\w\n].*)?"}


def ptb_vocab(data: Path) -> WordVocab:
    words = (data / "ptb" / "ptb.train.txt").read_text().split()
    return WordVocab.build(words, max_size=10_000)


def bpe_like(data: Path, size: int = 50_000) -> list[str]:
    """Deterministic BPE-like vocabulary of ``size`` distinct strings."""
    text = (data / "tinyshakespeare" / "input.txt").read_text() + (data / "ptb" / "ptb.train.txt").read_text()
    base = sorted(set(string.printable) | set(text))
    numbers = [f"{i:02d}" for i in range(100)] + [f"{i:03d}" for i in range(1000)]
    counts = collections.Counter(text.split())
    pieces: collections.Counter[str] = collections.Counter()
    for word, c in counts.items():
        pieces[word] += c
        pieces[" " + word] += c
        for n in range(2, min(len(word), 6) + 1):
            pieces[word[:n]] += c
            pieces[word[-n:]] += c
    out = list(dict.fromkeys(base + numbers))
    seen = set(out)
    for piece, _ in sorted(pieces.items(), key=lambda kv: (-kv[1], kv[0])):
        if len(out) >= size:
            break
        if piece not in seen:
            seen.add(piece)
            out.append(piece)
    return out


def quiet(fn):
    """Time ``fn`` with the garbage collector collected beforehand and paused (as timeit does)."""

    def run(*args):
        gc.collect()
        gc.disable()
        try:
            return fn(*args)
        finally:
            gc.enable()

    return run


def clocks() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def since(start: tuple[float, float]) -> tuple[float, float]:
    """(wall, CPU) seconds since ``start``: CPU time is what a loaded shared machine distorts least."""
    now = clocks()
    return now[0] - start[0], now[1] - start[1]


@quiet
def time_decodekit(pattern: str, tokens, eos: int, sep: str, vocab: bool = False):
    clear_cache(vocabularies=vocab)
    t0 = clocks()
    try:
        a = compile_regex(pattern, tokens, eos, sep)
        status = f"S={a.num_states}"
    except ConstraintError:
        status = "unspellable"
    return since(t0), status


@quiet
def time_outlines(pattern: str, vocabulary) -> tuple[float, str]:
    import outlines_core

    t0 = clocks()
    try:
        index = outlines_core.Index(pattern, vocabulary)
    except ValueError:
        return since(t0), "unspellable"
    elapsed = since(t0)
    return elapsed, f"S={len(index.get_transitions())}"


def bench_vocab(name: str, tokens, eos: int, sep: str, repeats: int, patterns: dict[str, str]) -> list[dict]:
    import outlines_core

    prefix = " " if sep == " " else ""
    mapping: dict[str | bytes, list[int]] = {}
    for i, t in enumerate(tokens):
        if t is not None and i != eos:
            mapping.setdefault(t if isinstance(t, bytes) else prefix + t, []).append(i)
    vocabulary = outlines_core.Vocabulary(eos, mapping)
    rows = []
    for key, pattern in patterns.items():
        oc_pattern = NO_WORD_BOUNDARY.get(key, pattern)
        oc_pattern = f" (?:{oc_pattern})" if sep == " " else oc_pattern
        full = time_decodekit(pattern, tokens, eos, sep, True)[0][0]  # once, preparing the vocabulary too
        ours, theirs = [], []
        for _ in range(repeats):
            t, status = time_decodekit(pattern, tokens, eos, sep)
            ours.append(t)
            t, oc_status = time_outlines(oc_pattern, vocabulary)
            theirs.append(t)
        row = dict(vocab=name, pattern=key, full=full, status=status, oc_status=oc_status)
        for who, runs in (("ours", ours), ("theirs", theirs)):
            row[who] = statistics.median(w for w, _ in runs)
            row[who + "_cpu"] = min(c for _, c in runs)
        rows.append(row)
        print_row(row)
    return rows


def print_row(r: dict) -> None:
    print(
        f"| {r['vocab']} | {r['pattern']} | {r['status']} | {r['oc_status']} "
        f"| {1e3 * r['ours']:.1f} / {1e3 * r['ours_cpu']:.1f} | {1e3 * r['full']:.1f} "
        f"| {1e3 * r['theirs']:.1f} / {1e3 * r['theirs_cpu']:.1f} "
        f"| {r['ours'] / r['theirs']:.2f} / {r['ours_cpu'] / max(r['theirs_cpu'], 1e-6):.2f} |",
        flush=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=Path("../shared/data"))
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--only", choices=["ptb-words", "bpe-50k", "bpe-bytes"], default=None)
    ap.add_argument("--cache", type=Path, default=None, help="bpe-bytes: where its trained tokenizer is kept")
    ap.add_argument(
        "--list",
        action="store_true",
        help="pass the token strings as a list (copied and hashed on every call)",
    )
    ap.add_argument("--patterns", nargs="+", choices=list(PATTERNS), default=None, help="default: all")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    patterns = {k: PATTERNS[k] for k in args.patterns or PATTERNS}
    container = list if args.list else tuple
    print(
        "| vocabulary | pattern | decodekit states | outlines-core states "
        "| decodekit ms (wall median / CPU min) | decodekit ms, cold vocab (wall) "
        "| outlines-core ms (wall median / CPU min) "
        "| ratio decodekit/oc (wall / CPU) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    if args.only in (None, "ptb-words"):
        vocab = ptb_vocab(args.data)
        bench_vocab("ptb-words (10k)", container(vocab.surfaces()), vocab.eos_id, " ", args.repeats, patterns)
    if args.only in (None, "bpe-50k"):
        tokens = bpe_like(args.data)
        bench_vocab("bpe-50k", container([*tokens, None]), len(tokens), "", args.repeats, patterns)
    if args.only in (None, "bpe-bytes"):
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from bench_byte_patterns import byte_bpe

        _, _, byte_tokens, eos = byte_bpe(args.data, cache=args.cache, verbose=False)
        bench_vocab("bpe-bytes (50k)", container(byte_tokens), eos, "", args.repeats, patterns)


if __name__ == "__main__":
    main()
