"""Kneser-Ney n-gram reproductions: PTB KN5 (Mikolov et al. 2011: test perplexity 141.2) and the
Brown n-gram baselines of Bengio et al. (2003, Table 1), optionally the MLP + trigram mixture.

    python benchmarks/bench_ngram.py --corpus ptb --orders 2 3 4 5
    python benchmarks/bench_ngram.py --corpus brown --orders 3 4 5
    python benchmarks/bench_ngram.py --corpus brown --orders 3 --mlp runs/brown-mlp   # + mixture

Perplexity counts every token, ``<eos>`` included (one per PTB line, one per Brown paragraph).
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import numpy as np
import torch
from markdown_tables import markdown_table

from decodekit.data import load_brown, load_corpus
from decodekit.models import NgramLM, stream_logprobs, train_kneser_ney
from decodekit.models.arpa import read_arpa, write_arpa
from decodekit.models.kneser_ney import _count
from decodekit.models.mixture import MixtureLM
from decodekit.training import evaluate

PUBLISHED = {
    ("ptb", 5): "141.2 test (Mikolov et al. 2011, KN5)",
    ("brown", 3): "334 valid / 323 test (Bengio et al. 2003, KN back-off)",
    ("brown", 4): "332 / 321",
    ("brown", 5): "332 / 321",
    ("brown", "di"): "352 / 336 (Bengio et al. 2003, deleted interpolation)",
}


def ml_ngram(train: torch.Tensor, order: int, V: int, eos: int) -> NgramLM:
    """Maximum-likelihood n-gram p(w | h) = c(h w) / c(h), backing off (weight 1) to the order
    below only for contexts never seen, in back-off form (bo = 0 for seen contexts)."""
    tables = _count(np.concatenate([[eos], train.numpy()]).astype(np.int64), order, V, eos)
    keys, logp, logbo = [], [], []
    with np.errstate(divide="ignore"):
        for k, tab in enumerate(tables, start=1):
            c = tab["count"].astype(np.float64)
            if k == 1:
                p = c / c.sum()
            else:
                prefix = tab["keys"] // V
                total = np.bincount(prefix, weights=c, minlength=len(tables[k - 2]["keys"]))
                p = c / total[prefix]
                logbo[-1] = np.where(total > 0, -np.inf, 0.0)
            keys.append(torch.from_numpy(tab["keys"]))
            logp.append(np.log(p))
            logbo.append(np.zeros(len(p)))
    return NgramLM(keys, [torch.from_numpy(x) for x in logp], [torch.from_numpy(x) for x in logbo], V, eos)


def deleted_interpolation(corpus) -> MixtureLM:
    """Jelinek-Mercer trigram: ML trigram, bigram, unigram and uniform, weights by EM on valid
    (one global weight per order; Bengio et al. bin the weights by context frequency)."""
    V, eos = len(corpus.vocab), corpus.vocab.eos_id
    uniform = NgramLM([torch.arange(V)], [torch.full((V,), -math.log(V))], [torch.zeros(V)], V, eos)
    mix = MixtureLM([ml_ngram(corpus.train, n, V, eos) for n in (3, 2, 1)] + [uniform])
    mix.fit([corpus.valid])
    return mix


def ppl(logprobs: torch.Tensor) -> float:
    return float(torch.exp(-logprobs.double().mean()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="../shared/data", help="folder with ptb/ and brown/brown.zip")
    ap.add_argument("--corpus", choices=["ptb", "brown"], default="ptb")
    ap.add_argument("--orders", type=int, nargs="+", default=[5])
    ap.add_argument(
        "--arpa", default=None, help="also write the highest order to this ARPA file and re-read it"
    )
    ap.add_argument(
        "--mlp", default=None, help="checkpoint directory of a trained MLP: report the EM mixture"
    )
    ap.add_argument("--deleted-interpolation", action="store_true", help="also the Jelinek-Mercer trigram")
    ap.add_argument("--markdown", action="store_true", help="end with docs/benchmarks.md's table")
    args = ap.parse_args()
    table = []  # (model, test ppl, published)
    torch.set_num_threads(1)
    data = Path(args.data)
    t0 = time.perf_counter()
    corpus = load_corpus(data / "ptb") if args.corpus == "ptb" else load_brown(data / "brown" / "brown.zip")
    print(
        f"{args.corpus}: |V|={len(corpus.vocab)} train/valid/test tokens "
        f"{corpus.train.numel()}/{corpus.valid.numel()}/{corpus.test.numel()}"
        f" (load {time.perf_counter() - t0:.1f}s)"
    )
    print(f"{'order':>5} {'n-grams':>10} {'train s':>8} {'valid ppl':>10} {'test ppl':>9}  published")
    model = None
    for n in args.orders:
        t0 = time.perf_counter()
        model = train_kneser_ney(corpus.train, n, len(corpus.vocab), corpus.vocab.eos_id, vocab=corpus.vocab)
        secs = time.perf_counter() - t0
        valid, test = evaluate(model, corpus.valid).ppl, evaluate(model, corpus.test).ppl
        size = sum(len(k) for k in model.keys[1:]) + len(corpus.vocab)
        print(
            f"{n:>5} {size:>10} {secs:>8.2f} {valid:>10.2f} {test:>9.2f}"
            f"  {PUBLISHED.get((args.corpus, n), '')}"
        )
        table.append((f"{args.corpus.upper()} KN{n}", f"**{test:.2f}**", PUBLISHED.get((args.corpus, n), "")))
    if args.deleted_interpolation:
        di = deleted_interpolation(corpus)
        log_w = di.weights.log().view(-1, 1)
        lp = {}
        for k in ("valid", "test"):
            parts = torch.stack([stream_logprobs(m, getattr(corpus, k)) for m in di.models]).double()
            lp[k] = torch.logsumexp(parts + log_w, 0)
        weights = "/".join(f"{w:.2f}" for w in di.weights.tolist())
        print(f"{'DI 3':>5} {'':>10} {'':>8} {ppl(lp['valid']):>10.2f} {ppl(lp['test']):>9.2f}  "
              f"EM weights (3/2/1/uniform) {weights}; {PUBLISHED.get((args.corpus, 'di'), '')}")  # fmt: skip
        published = PUBLISHED.get((args.corpus, "di"), "")
        table.append((f"{args.corpus.upper()} DI trigram", f"{ppl(lp['test']):.2f}", published))
    if args.arpa and model is not None:
        t0 = time.perf_counter()
        write_arpa(model, args.arpa)
        t1 = time.perf_counter()
        back = read_arpa(args.arpa, vocab=corpus.vocab)
        t2 = time.perf_counter()
        diff = float((stream_logprobs(back, corpus.test) - stream_logprobs(model, corpus.test)).abs().max())
        print(
            f"ARPA {args.arpa}: write {t1 - t0:.1f}s, read {t2 - t1:.1f}s, re-read test ppl "
            f"{evaluate(back, corpus.test).ppl:.2f}, max |log p difference| {diff:.2e}"
        )
        kenlm_check(args.arpa, data / args.corpus if args.corpus == "ptb" else None, model, corpus)
    if args.mlp:
        table += mixture_report(args.mlp, corpus)
    if args.markdown:
        print("\n" + markdown_table(("model", "test ppl", "published"), table))


def kenlm_check(arpa: str, ptb: Path | None, model: NgramLM, corpus) -> None:
    """If the ``kenlm`` module is installed: KenLM's perplexity of the test sentences from the
    same ARPA file (``<s> w1 .. wn </s>`` per PTB line), beside decodekit's."""
    try:
        import kenlm
    except ImportError:
        print("kenlm not installed: skipping the KenLM check (pip install kenlm)")
        return
    if ptb is None:
        return
    km = kenlm.Model(arpa)
    lines = [line.split() for line in (ptb / "ptb.test.txt").read_text().splitlines() if line.split()]
    total = sum(km.score(" ".join(ws), bos=True, eos=True) for ws in lines)
    n = sum(len(ws) + 1 for ws in lines)
    print(f"KenLM reads {arpa}: test ppl {10 ** (-total / n):.5f} over {n} tokens; "
          f"decodekit {evaluate(model, corpus.test).ppl:.5f}")  # fmt: skip


def mixture_report(path: str, corpus) -> list[tuple[str, str, str]]:
    """MLP alone, KN and deleted-interpolation trigrams alone, their 0.5/0.5 mixtures with the MLP
    (Bengio's "mix") and mixtures with EM weights fitted on valid; ppl from token log-probs.
    Returns the Markdown table's rows (model, test ppl, published)."""
    from decodekit.loading import load_model
    from decodekit.models.mixture import fit_weights

    mlp = load_model(path)
    if mlp.vocab != corpus.vocab:
        raise SystemExit(f"{path}: the MLP's vocabulary is not this corpus's vocabulary")
    V, eos = len(corpus.vocab), corpus.vocab.eos_id
    kn, di = train_kneser_ney(corpus.train, 3, V, eos, vocab=corpus.vocab), deleted_interpolation(corpus)
    lp = {}  # name -> split -> [T]
    for split in ("valid", "test"):
        ids = getattr(corpus, split)
        lp.setdefault("MLP", {})[split] = stream_logprobs(mlp, ids).double()
        lp.setdefault("KN trigram", {})[split] = stream_logprobs(kn, ids).double()
        parts = torch.stack([stream_logprobs(m, ids).double() for m in di.models])
        parts = parts + di.weights.log().view(-1, 1)
        lp.setdefault("DI trigram", {})[split] = torch.logsumexp(parts, 0)
    print(f"{'model':>40} {'valid ppl':>10} {'test ppl':>9}")
    rows = []
    for name in ("MLP", "KN trigram", "DI trigram"):
        print(f"{name:>40} {ppl(lp[name]['valid']):>10.2f} {ppl(lp[name]['test']):>9.2f}")
        rows.append((name, f"{ppl(lp[name]['test']):.2f}", ""))
    for tri in ("DI trigram", "KN trigram"):
        pair = {k: torch.stack([lp["MLP"][k], lp[tri][k]]) for k in ("valid", "test")}  # [2, T]
        em, _ = fit_weights(pair["valid"])
        for label, w in ((f"MLP + {tri} 0.5/0.5", torch.tensor([0.5, 0.5], dtype=torch.float64)),
                         (f"MLP + {tri} EM {em[0]:.2f}/{em[1]:.2f}", em)):  # fmt: skip
            mixed = {k: torch.logsumexp(pair[k] + w.log().view(2, 1), 0) for k in pair}
            print(f"{label:>40} {ppl(mixed['valid']):>10.2f} {ppl(mixed['test']):>9.2f}")
            rows.append((label, f"{ppl(mixed['test']):.2f}", ""))
    return rows


if __name__ == "__main__":
    main()
