"""``decodekit eval``: perplexity of a model on a text file (full softmax, state carried)."""

from __future__ import annotations

import json
import warnings

import click

from decodekit.cli import cli


@cli.command("eval")
@click.option(
    "--model",
    "model_spec",
    help="Checkpoint directory or ARPA n-gram file (default: the model shipped with decodekit).",
)
@click.option(
    "--data",
    required=True,
    type=click.Path(exists=True),
    help="Text file, one sentence per line (<eos> appended per line); a corpus directory: its test "
    "file; NLTK's brown.zip (or its directory): the test part of Bengio et al.'s split.",
)
@click.option("--device", default="cpu", show_default=True)
@click.option("--threads", type=int, help="torch CPU threads (default: torch's choice).")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON object.")
def eval_command(model_spec: str | None, data: str, device: str, threads: int | None, as_json: bool) -> None:
    """Perplexity exp(-(1/L) sum_t log p(x_t | x_<t)) of --data under the model, every token
    (each line's <eos> included) predicted from the whole preceding stream."""
    import torch

    from decodekit import encode_tokens, eval_tokens, load_model
    from decodekit.training import evaluate

    if threads:
        torch.set_num_threads(threads)
    model = load_model(model_spec, device=device)
    tokens, path = eval_tokens(data, chars=model.vocab.kind == "char")
    ids, unknown = encode_tokens(tokens, model.vocab)
    if unknown:
        warnings.warn(
            f"{unknown} of {ids.numel()} tokens in {path} are not in the vocabulary: mapped to <unk>",
            stacklevel=1,
        )
    result = evaluate(model, ids)  # any model: checkpoints, ARPA n-grams
    if as_json:
        click.echo(
            json.dumps(
                {
                    "perplexity": result.ppl,
                    "tokens": result.tokens,
                    "nll": result.nll,
                    "unknown": unknown,
                    "data": str(path),
                    "model": model_spec or "default",
                }
            )
        )
    else:
        click.echo(f"perplexity {result.ppl:.2f} ({result.tokens} tokens, {unknown} mapped to <unk>)")
