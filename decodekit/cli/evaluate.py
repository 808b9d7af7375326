"""``decodekit eval``: perplexity of a model on a text file (full softmax, state carried)."""

from __future__ import annotations

import json
import warnings

import click

from decodekit.cli.common import (
    load_model_option,
    model_options,
    need_vocab,
    set_threads,
    threads_option,
)


@click.command("eval")
@model_options
@click.option(
    "--data",
    required=True,
    type=click.Path(exists=True),
    help="Text file, one sentence per line (<eos> appended per line); a corpus directory: its test "
    "file; NLTK's brown.zip (or its directory): the test part of Bengio et al.'s split.",
)
@threads_option
@click.option("--json", "as_json", is_flag=True, help="Print a JSON object.")
def eval_command(
    model_spec: str | None, hf_model: str | None, data: str, device: str, threads: int | None, as_json: bool
) -> None:
    """Perplexity exp(-(1/L) sum_t log p(x_t | x_<t)) of --data under the model, every token
    (each line's <eos> included) predicted from the whole preceding stream. A progress bar is
    drawn on stderr when it is a terminal."""

    from decodekit.data import encode_tokens, eval_tokens
    from decodekit.training import evaluate

    model = load_model_option(model_spec, hf_model, device)
    set_threads(threads, model)
    need_vocab(model, "eval")
    tokens, path = eval_tokens(data, chars=model.vocab.kind == "char")
    if model.vocab.kind == "hf":  # the model's own subword tokens, each line followed by its eos
        ids, unknown = _subword_ids(model, tokens), 0
    else:
        ids, unknown = encode_tokens(tokens, model.vocab)
    if unknown:
        warnings.warn(
            f"{unknown} of {ids.numel()} tokens in {path} are not in the vocabulary: mapped to <unk>",
            stacklevel=1,
        )
    result = evaluate(model, ids, progress=True)  # any model: checkpoints, ARPA n-grams, transformers
    if as_json:
        click.echo(
            json.dumps(
                {
                    "perplexity": result.ppl,
                    "tokens": result.tokens,
                    "nll": result.nll,
                    "unknown": unknown,
                    "data": str(path),
                    "model": model_spec or hf_model or "default",
                }
            )
        )
    else:
        click.echo(f"perplexity {result.ppl:.2f} ({result.tokens} tokens, {unknown} mapped to <unk>)")


def _subword_ids(model, words: list[str]):
    """The lines of a word stream (``<eos>`` after each) in a transformers model's own tokens,
    its eos after each line (none when it has none)."""
    import torch

    ids, line = [], []
    for w in words:
        if w != "<eos>":
            line.append(w)
            continue
        ids += model.encode(" ".join(line)) + ([] if model.eos_id is None else [model.eos_id])
        line = []
    return torch.tensor(ids, dtype=torch.long)
