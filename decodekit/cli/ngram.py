"""``decodekit ngram``: train an interpolated modified Kneser-Ney model on a corpus and write it
as an ARPA file (which ``decodekit eval`` / ``generate --model FILE.arpa`` then read)."""

from __future__ import annotations

import json
import time

import click

from decodekit.cli.common import UsageError


@click.command("ngram")
@click.option(
    "--data",
    required=True,
    type=click.Path(exists=True),
    help="Corpus: as for `decodekit train` (PTB-style directory, Brown's brown.zip, or one text file).",
)
@click.option("--order", default=5, show_default=True, help="n, the longest n-gram.")
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="ARPA file to write.")
@click.option("--min-count", type=int, default=None, help="Vocabulary: minimum training count.")
@click.option(
    "--chars", is_flag=True, help="Character-level vocabulary (ARPA cannot hold a space character)."
)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON object.")
def ngram_command(data: str, order: int, out: str, min_count: int | None, chars: bool, as_json: bool) -> None:
    """Interpolated modified Kneser-Ney (Chen & Goodman's three discounts per order) trained on
    the training split, written as ARPA; prints validation and test perplexity. Progress bars are
    drawn on stderr when it is a terminal."""
    from decodekit import load_data
    from decodekit.models import train_kneser_ney, write_arpa
    from decodekit.training import evaluate
    from decodekit.util.files import writable_target

    if order < 1:
        raise UsageError(f"--order must be >= 1, got {order}")
    writable_target(out, "--out")  # a device or FIFO is refused before the training, not after
    corpus = load_data(data, min_count=min_count, chars=chars)
    t0 = time.perf_counter()
    model = train_kneser_ney(corpus.train, order, len(corpus.vocab), corpus.vocab.eos_id, vocab=corpus.vocab)
    seconds = time.perf_counter() - t0
    write_arpa(model, out)
    result = {
        "order": order,
        "ngrams": [len(k) for k in model.keys],
        "discounts": [list(d) for d in model.discounts],
        "train_seconds": round(seconds, 3),
        "valid_ppl": evaluate(model, corpus.valid, progress=True).ppl,
        "test_ppl": evaluate(model, corpus.test, progress=True).ppl,
        "out": out,
    }
    if as_json:
        click.echo(json.dumps(result))
    else:
        click.echo(
            f"KN{order}: {sum(result['ngrams'])} n-grams in {seconds:.1f}s; valid perplexity "
            f"{result['valid_ppl']:.2f}, test {result['test_ppl']:.2f}; wrote {out}"
        )
