"""``decodekit generate``: decode a prompt with any strategy, optionally under a regex."""

from __future__ import annotations

import json
import warnings

import click

from decodekit.cli import cli
from decodekit.cli.common import UsageError

STRATEGIES = ("greedy", "sample", "beam")


@cli.command()
@click.argument("prompt", required=True)
@click.option(
    "--model", "model_spec", metavar="DIR", help="Checkpoint directory (default: the bundled PTB LSTM)."
)
@click.option(
    "--hf-model", metavar="PATH", help="A local transformers causal LM directory (needs decodekit[hf])."
)
@click.option(
    "--strategy",
    type=click.Choice(STRATEGIES),
    help="Search strategy. Default: beam with --constraint (Anderson-style search), else greedy.",
)
@click.option(
    "--constraint", metavar="REGEX", help="Regex the whole continuation must match, e.g. '.*\\bprofit\\b.*'."
)
@click.option(
    "--max-length",
    type=click.IntRange(min=0),
    default=30,
    show_default=True,
    help="Most tokens to generate, EOS included.",
)
@click.option("--beam-size", type=click.IntRange(min=1), default=5, show_default=True)
@click.option(
    "--length-penalty",
    type=float,
    default=1.0,
    show_default=True,
    help="alpha in score = logprob / len**alpha (0: raw log-probability).",
)
@click.option(
    "--n-best", type=click.IntRange(min=1), default=1, show_default=True, help="Hypotheses to print (beam)."
)
@click.option("--temperature", type=float, default=1.0, show_default=True)
@click.option("--top-k", type=click.IntRange(min=1), default=None)
@click.option("--top-p", type=float, default=None)
@click.option("--min-p", type=float, default=None)
@click.option(
    "--num-samples",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Samples to draw (sample).",
)
@click.option("--seed", type=int, default=None, help="Random seed for sampling (reproducible output).")
@click.option("--device", default="cpu", show_default=True, help="cpu, cuda, cuda:1, ... or auto.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per hypothesis per line.")
def generate(
    prompt,
    model_spec,
    hf_model,
    strategy,
    constraint,
    max_length,
    beam_size,
    length_penalty,
    n_best,
    temperature,
    top_k,
    top_p,
    min_p,
    num_samples,
    seed,
    device,
    as_json,
):
    """Generate a continuation of PROMPT (text, tokenised by the model's vocabulary).

    \b
    Examples:
      decodekit generate "the company said"
      decodekit generate "the company said" --constraint '.*\\bprofit\\b.*'
      decodekit generate "the" --strategy sample --top-p 0.9 --seed 1 --num-samples 3 --json
    """
    import decodekit
    from decodekit.loading import load_model

    if model_spec and hf_model:
        raise UsageError("give either --model or --hf-model, not both")
    if hf_model:
        from decodekit.models.hf import load_hf

        model = load_hf(hf_model, device=_device(device))
    else:
        model = load_model(model_spec, device=_device(device))
    vocab = getattr(model, "vocab", None)
    if vocab is None:
        raise UsageError("this model has no vocabulary, so text prompts cannot be encoded")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ids = vocab.encode(prompt)
    for w in caught:
        click.echo(f"Warning: {w.message}", err=True)
    strategy = strategy or ("beam" if constraint else "greedy")
    if strategy == "greedy":
        hyps = decodekit.greedy(model, ids, max_length, constraint=constraint)
    elif strategy == "sample":
        hyps = decodekit.sample(
            model,
            ids,
            max_length,
            temperature=temperature,
            top_k=top_k,
            top_p=top_p,
            min_p=min_p,
            generator=seed,
            num_samples=num_samples,
            constraint=constraint,
        )
    elif constraint:
        hyps = decodekit.constrained_beam_search(
            model, ids, constraint, beam_size, max_length, length_penalty=length_penalty, n_best=n_best
        )
    else:
        hyps = decodekit.beam_search(
            model, ids, beam_size, max_length, length_penalty=length_penalty, n_best=n_best
        )
    if not hyps:
        click.echo(
            f"Error: no continuation matching {constraint!r} was found within "
            f"--max-length {max_length}; try a larger --beam-size or --max-length",
            err=True,
        )
        raise SystemExit(1)
    for h in hyps:
        click.echo(json.dumps(h.to_dict(vocab)) if as_json else h.text(vocab))


def _device(name: str):
    import torch

    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(name)
    except RuntimeError as e:
        raise UsageError(f"invalid --device {name!r}: {e}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda was asked for but no CUDA device is available; use --device cpu")
    return dev
