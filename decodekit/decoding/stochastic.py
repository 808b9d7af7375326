"""Stochastic beam search (Kool, van Hoof and Welling 2019, "Stochastic Beams and Where to Find
Them", arXiv:1903.06059): k distinct sequences sampled **without replacement** from the
distribution :func:`~.rowwise.sample` draws from (temperature; under a constraint the masked
distribution renormalised at each step), by Gumbel-top-k over the search tree.

Every sequence y of the sampling distribution q gets a perturbed log-probability
``G_y = phi_y + Gumbel(0)``, ``phi_y = log q(y)``; the k sequences of largest ``G_y`` are a sample
without replacement of size k (the Gumbel-top-k trick). They are found top down: a prefix's key is
the largest key among its completions, ``Gumbel(phi_prefix)``, and the children of a prefix with
key T get keys ``Gumbel(phi_child)`` conditioned on their maximum being T:

    G_child = phi_child + Gumbel(0),  Z = max over children G_child,
    key_child = -log(exp(-T) - exp(-Z) + exp(-G_child))

computed in the stable form of the paper's appendix B: ``v = T - G_child + log1mexp(G_child - Z)``,
``key_child = T - max(v, 0) - log1p(exp(-|v|))``. A beam search on these keys, of width k + 1,
keeps every ancestor of the k + 1 largest leaves (a node's key is its largest leaf's), so the
search is exact; it stops when k + 1 ended sequences beat every live key (``Pool.update``).

The (k+1)-th key kappa gives each of the k sequences returned its inclusion probability
``q(y in sample) ~ 1 - exp(-exp(phi_y - kappa))`` (the paper's section 4: with these,
``sum_y q(y) / incl(y) * f(y)`` estimates ``E_q[f]`` without bias). Hypotheses carry ``score`` =
their key, ``sample_logprob`` = ``phi_y``, ``inclusion_probability``, and the model's ``logprob``.
"""

from __future__ import annotations

import dataclasses
import math

import torch

from decodekit.constraints import TokenConstraint
from decodekit.decoding import processors
from decodekit.decoding.search import NEG_INF, Search, Select, Selection
from decodekit.decoding.strategies import Strategy
from decodekit.models.base import model_device
from decodekit.util.checks import at_least

LOG_HALF = math.log(0.5)


def log1mexp(a: torch.Tensor) -> torch.Tensor:
    """``log(1 - exp(a))`` for ``a <= 0``, accurate at both ends (Maechler 2012)."""
    return torch.where(a > LOG_HALF, torch.log(-torch.expm1(a)), torch.log1p(-torch.exp(a)))


def truncated_gumbel(parent_key: torch.Tensor, perturbed: torch.Tensor, top: torch.Tensor) -> torch.Tensor:
    """Children's keys: ``perturbed [N, C]`` Gumbels ``G``, conditioned on their maximum ``top
    [N, 1]`` (Z) being ``parent_key [N, 1]`` (T), in the stable form (module docstring); -inf where
    ``G`` or T is -inf (impossible children, empty rows)."""
    gap = torch.where(torch.isfinite(top), perturbed - top, perturbed.new_tensor(NEG_INF))
    v = parent_key - perturbed + log1mexp(gap.clamp(max=0.0))
    key = parent_key - v.clamp(min=0.0) - torch.log1p(torch.exp(-v.abs()))
    dead = (perturbed == NEG_INF) | (parent_key == NEG_INF)
    return torch.where(dead, perturbed.new_tensor(NEG_INF), key)


def stochastic_selection(
    width: int,
    vocab: int,
    eos: int | None,
    automaton: TokenConstraint | None,
    temperature: float,
    generator: torch.Generator | None,
) -> Select:
    """Width W = k + 1 rows per prompt, rows ``b * W + j``; ``rows.key``: the prefixes' keys,
    ``rows.sample_logprob``: their ``phi`` (see the module docstring)."""
    per_row = min(width + (eos is not None), vocab)
    n_cand = min(2 * width if eos is not None else width, width * per_row)

    def select(logprobs: torch.Tensor, rows: Selection, remaining: int) -> Selection:
        batch, ended, ended_logprob, ended_key, ended_phi = logprobs.shape[0] // width, None, None, None, None
        masked = logprobs if automaton is None else automaton.mask(logprobs, rows.states, remaining)  # [N, V]
        if automaton is None and temperature == 1:
            dist = masked  # the model's distribution, already normalised
        else:  # the distribution sampled from: tempered, masked, renormalised (-inf rows: stuck)
            dist = torch.log_softmax(processors.process(masked, t=temperature).float(), dim=-1)
            stuck = masked.amax(-1) == NEG_INF  # [N]
            dist = dist.masked_fill(stuck[:, None], NEG_INF)
            if eos is None and automaton is not None:  # an accepting prefix with no way on ends here
                ends = stuck & automaton.is_accepting(rows.states) & (rows.key > NEG_INF)
                ended = ends.nonzero()[:, 0]
                ended_logprob, ended_key = rows.logprob[ended], rows.key[ended]
                ended_phi = rows.sample_logprob[ended]
        # Gumbel(0) = -log(-log U); U >= 2**-30 (float32's rand has steps of 2**-24, 0 included)
        noise = torch.rand(dist.shape, generator=generator, device=dist.device, dtype=dist.dtype)
        noise = noise.clamp_(min=2**-30).log_().neg_().log_().neg_()  # [N, V]
        # the key is increasing in the perturbed value within a row: a row's best children first
        perturbed, row_tok = (dist + noise).topk(per_row, dim=1)  # [N, K+1], less the row's phi
        perturbed = perturbed + rows.sample_logprob[:, None]  # phi_child + Gumbel(0)
        key = truncated_gumbel(rows.key[:, None], perturbed, perturbed[:, :1])
        flat = key.view(batch, -1)
        top_key, top_idx = flat.topk(n_cand, dim=1)  # [B, 2W], largest first
        row_base = torch.arange(batch, device=logprobs.device)[:, None] * width
        parent, token = top_idx // per_row + row_base, row_tok.view(batch, -1).gather(1, top_idx)
        if eos is not None:
            is_eos = token == eos
            hit = is_eos[:, :width] & (top_key[:, :width] > NEG_INF)  # EOS ranked within the W largest
            done_rows = parent[:, :width][hit]
            ended, ended_key = done_rows, top_key[:, :width][hit]
            ended_logprob = rows.logprob[done_rows] + logprobs[done_rows, eos]
            ended_phi = rows.sample_logprob[done_rows] + dist[done_rows, eos]
            # the first W non-EOS
            keep = torch.sort(is_eos.to(torch.uint8), dim=1, stable=True).indices[:, :width]
            top_key, parent, token = top_key.gather(1, keep), parent.gather(1, keep), token.gather(1, keep)
            top_key = top_key.masked_fill(token == eos, NEG_INF)
        else:
            top_key, parent, token = top_key[:, :width], parent[:, :width], token[:, :width]
        parents, tokens, top_key = parent.reshape(-1), token.reshape(-1), top_key.reshape(-1)
        empty = top_key == NEG_INF
        cum = (rows.logprob[parents] + logprobs[parents, tokens]).masked_fill(empty, NEG_INF)
        states = None if automaton is None else automaton.step(rows.states[parents], tokens)
        return Selection(
            cum, states, parents, tokens, ended, ended_logprob,
            key=top_key, ended_key=ended_key,
            sample_logprob=(rows.sample_logprob[parents] + dist[parents, tokens]).masked_fill(empty, NEG_INF),
            ended_sample_logprob=ended_phi,
        )  # fmt: skip

    return select


def _generator(seed, device) -> torch.Generator | None:
    if isinstance(seed, int):
        return torch.Generator(device=device).manual_seed(seed)
    return seed  # a torch.Generator, or None: torch's global one


def _start(search: Search, batch: int) -> tuple[Select, Selection]:
    """k + 1 rows per prompt, the first live with key ~ Gumbel(0) (the root's: every key below is
    then a Gumbel of its own phi, as the inclusion probabilities need)."""
    s, model, automaton = search.settings, search.model, search.automaton
    width, device = s.beam_size + 1, model_device(model)
    generator = _generator(s.seed, device)
    cum = torch.full((batch, width), NEG_INF, device=device)
    cum[:, 0] = 0.0
    key = cum.clone()
    key[:, 0] = -torch.empty(batch, device=device).exponential_(generator=generator).log()
    states = None if automaton is None else torch.full_like(cum, automaton.initial, dtype=torch.long).view(-1)
    select = stochastic_selection(width, model.vocab_size, model.eos_id, automaton, s.temperature, generator)
    return select, Selection(cum.view(-1), states, key=key.view(-1), sample_logprob=cum.view(-1).clone())


def with_inclusion(out, settings):
    """Each prompt's k hypotheses of largest key (of the k + 1 found), with
    ``inclusion_probability = 1 - exp(-exp(sample_logprob - kappa))``, kappa the (k+1)-th key
    (-inf when fewer than k + 1 sequences exist: then every one is certain, 1)."""
    k, single = settings.beam_size, not out or not isinstance(out[0], list)
    batch, done = [out] if single else out, []
    for hyps in batch:
        kappa = hyps[k].score if len(hyps) > k else NEG_INF
        done.append(
            [
                dataclasses.replace(h, inclusion_probability=inclusion(h.sample_logprob, kappa))
                for h in hyps[:k]
            ]
        )
    return done[0] if single else done


def inclusion(phi: float, kappa: float) -> float:
    """``P(Gumbel(phi) > kappa) = 1 - exp(-exp(phi - kappa))``."""
    if kappa == NEG_INF:
        return 1.0
    return -math.expm1(-math.exp(min(phi - kappa, 700.0)))


def _check(settings) -> None:
    at_least("beam_size", settings.beam_size)
    processors.validate(settings.temperature, None, None, None)


STOCHASTIC_BEAM = Strategy(
    "stochastic-beam",
    "stochastic beam search",
    start=_start,
    rows=lambda settings, states: settings.beam_size + 1,
    # a beam's units, plus the sampling distribution, the noise and the perturbed copy
    working_set=lambda settings: 6.5,
    reads=("beam_size", "temperature", "seed"),
    ranked=True,
    knob="beam_size",
    returns="beam_size",
    check=_check,
    keeps=lambda settings: settings.beam_size + 1,
    finish=with_inclusion,
)
