"""What one search returns, in memory: :class:`Hypothesis` (a continuation) and :class:`SearchTree`
(the search drawn), plain dataclasses and their rendering to text / JSON / Graphviz DOT. A job's
records on disk are :mod:`decodekit.result_file`."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from decodekit.vocab import Vocab


class TokenIds(tuple):
    """Token ids: a tuple (a hypothesis stays immutable and hashable: batch jobs and sets of
    outputs key on it) that also equals a list of the same ids, as transformers' outputs and
    plain Python write them: ``out.sequences[0, n:].tolist() == h.tokens`` is True."""

    __slots__ = ()

    def __eq__(self, other):
        return tuple.__eq__(self, tuple(other) if isinstance(other, list) else other)

    def __ne__(self, other):
        same = self.__eq__(other)
        return same if same is NotImplemented else not same

    __hash__ = tuple.__hash__


@dataclass(frozen=True)
class Hypothesis:
    """One generated continuation.

    Attributes:
        tokens: generated token ids (:class:`TokenIds`: a tuple equal to a list of the same ids);
            the prompt and a final EOS are excluded.
        logprob: sum of the log-probabilities of the generated tokens, EOS included.
        score: what the search ranked by (``logprob / len**length_penalty`` for beam searches,
            ``len`` counting EOS; ``logprob`` for greedy and sampling).
        finished: True if the hypothesis ended with EOS, False if it stopped at ``max_length``.
        token_logprobs: the model's log-probability of each generated token, EOS included when
            ``finished`` (transformers' ``compute_transition_scores``); they sum to ``logprob``.
        text: the continuation as text, when the search knew the model's vocabulary (every
            search does for a model with ``vocab``); else None (then :meth:`decode` with one).
            Not compared: hypotheses are equal by their tokens and scores.
        top_logprobs: with ``logprobs=N`` (the OpenAI API's name): per position, aligned with
            ``token_logprobs``, the N most probable tokens as ``(id, logprob)`` pairs, most
            probable first, of the **model's** distribution at that position (the one
            ``token_logprobs`` reads: after the controls and suppression, which are part of the
            model, before a constraint's mask and the sampling processors; tokens of probability
            0 left out); () without. Not compared.
        prompt_logprobs: with ``prompt_logprobs=N`` (vLLM's): per prompt token, None for a first
            token with no BOS before it, else ``(its id, its logprob, the N most probable (id,
            logprob) pairs)`` under the model without the controls; the same for every hypothesis
            of a prompt; () without. Not compared.
        sample_logprob: stochastic beam search: its log-probability under the distribution the
            search sampled from (the model's at temperature 1 without a constraint; else
            tempered, or masked and renormalised at each step); None for other searches.
        inclusion_probability: stochastic beam search: ``q = 1 - exp(-exp(sample_logprob - kappa))``,
            the probability that it is in a sample of the same size, kappa the next key
            (Kool et al. 2019); ``sum(exp(h.sample_logprob) / h.inclusion_probability * f(h))``
            estimates the expectation of f without bias. None for other searches.
    """

    tokens: tuple[int, ...]
    logprob: float
    score: float
    finished: bool
    token_logprobs: tuple[float, ...] = ()
    text: str | None = field(default=None, compare=False)
    top_logprobs: tuple[tuple[tuple[int, float], ...], ...] = field(default=(), compare=False)
    prompt_logprobs: tuple = field(default=(), compare=False)
    sample_logprob: float | None = None
    inclusion_probability: float | None = None

    def __post_init__(self) -> None:
        if type(self.tokens) is not TokenIds:
            object.__setattr__(self, "tokens", TokenIds(self.tokens))

    def decode(self, vocab: Vocab) -> str:
        """The continuation as text, detokenised by ``vocab``."""
        return vocab.decode(self.tokens)

    def to_dict(self, vocab: Vocab | None = None) -> dict:
        """A JSON-ready dict: ``tokens`` (ids), ``logprob``, ``score``, ``finished``,
        ``token_logprobs``; with ``vocab`` also ``text`` and ``token_texts`` (each generated
        token's text, EOS included when finished: aligned with ``token_logprobs``)."""
        d = asdict(self)
        del d["text"], d["top_logprobs"], d["prompt_logprobs"]
        for name in ("sample_logprob", "inclusion_probability"):  # stochastic beam search only
            if d[name] is None:
                del d[name]
        d["tokens"], d["token_logprobs"] = list(self.tokens), list(self.token_logprobs)
        if vocab is not None:
            ids = [*self.tokens, vocab.eos_id] if self.finished and vocab.eos_id is not None else self.tokens
            d = {"text": self.decode(vocab), **d, "token_texts": [token_text(vocab, i) for i in ids]}
        if self.top_logprobs:  # the EOS's id is known from the vocabulary only (else None)
            eos = [] if not self.finished else [getattr(vocab, "eos_id", None)]
            ids = [*self.tokens, *eos]
            rows = zip(ids, self.token_logprobs, self.top_logprobs)
            d["logprobs"] = {"content": [_logprob_entry(vocab, i, lp, top) for i, lp, top in rows]}
        if self.prompt_logprobs:
            d["prompt_logprobs"] = [
                None if e is None else _logprob_entry(vocab, *e) for e in self.prompt_logprobs
            ]
        return d


def _logprob_entry(vocab: Vocab | None, i: int | None, logprob: float, top) -> dict:
    """One position in the OpenAI API's layout (``{"token", "logprob", "bytes", "top_logprobs":
    [{"token", "logprob", "bytes"}]}``), with each token's ``token_id`` (vLLM's) added; ``token``
    and ``bytes`` only with a vocabulary."""

    def one(token: int | None, value: float) -> dict:
        out: dict = {"token_id": token, "logprob": value}
        if vocab is not None and token is not None:
            raw = vocab.surface_bytes()[token]
            out = {"token": token_text(vocab, token), **out, "bytes": None if raw is None else list(raw)}
        return out

    return {**one(i, logprob), "top_logprobs": [one(j, v) for j, v in top]}


def token_text(vocab: Vocab, i: int) -> str:
    """Token ``i``'s surface text, or its vocabulary entry for specials (``<eos>``)."""
    text = vocab.surface(i)
    return vocab.tokens[i] if text is None else text


@dataclass
class SearchTree:
    """What a search did, for drawing: pass ``record=SearchTree()`` to a strategy (or to
    :func:`decodekit.decoding.generation.generate`) and it is filled in; :meth:`to_dot` draws it.

    Step t's rows: ``parents[t][i]`` (the row of step t-1 it extends; at step 0 a start row),
    ``tokens[t][i]``, ``logprobs[t][i]`` (cumulative; -inf: an empty slot), ``states[t][i]``
    (automaton state; None without a constraint), ``prompts[t][i]`` (the prompt it belongs to).
    ``ended[b]``: every hypothesis of prompt b that ended, as ``(last_step, row, finished,
    logprob, score)`` (its last non-EOS token is ``row`` of ``last_step``; -1: none);
    ``best[b]``: the indices into ``ended[b]`` of the hypotheses returned, best first.
    """

    parents: list[list[int]] = field(default_factory=list)
    tokens: list[list[int]] = field(default_factory=list)
    logprobs: list[list[float]] = field(default_factory=list)
    states: list[list[int] | None] = field(default_factory=list)
    prompts: list[list[int]] = field(default_factory=list)
    ended: list[list[tuple[int, int, bool, float, float]]] = field(default_factory=list)
    best: list[list[int]] = field(default_factory=list)

    def to_dot(self, vocab: Vocab | None = None, prompt: int = 0) -> str:
        """Graphviz DOT of prompt ``prompt``'s search, left to right: one node per kept row of
        each step (its token and cumulative log-probability), edges from parents; hypotheses
        that ended are filled (EOS as its own node), the best one's path is bold. Under a
        constraint each automaton state's rows form a cluster (``cluster_state_q``): Anderson's
        per-state beams over time."""

        def label(token: int | None, value: float) -> str:
            token = token if token is not None or vocab is None else vocab.eos_id
            text = "EOS" if token is None else str(token) if vocab is None else token_text(vocab, token)
            return text.replace("\\", "\\\\").replace('"', '\\"') + f"\\n{value:.3f}"

        ended, best, highlight = self.ended[prompt], self.best[prompt], ", style=filled, fillcolor=lightblue"
        filled = {(s, r) for s, r, finished, _, _ in ended if not finished}
        bold, clusters = set(), {}
        lines = ["digraph search {", "  rankdir=LR;", '  root [label="prompt", shape=box];']
        if best:  # the winner's path: (step, row) back to the root
            step, row = ended[best[0]][:2]
            for s in range(step, -1, -1):
                bold.add((s, row))
                row = self.parents[s][row]
        for t, (parents, tokens, values) in enumerate(zip(self.parents, self.tokens, self.logprobs)):
            for i, (parent, token, value) in enumerate(zip(parents, tokens, values)):
                if self.prompts[t][i] != prompt or value == -math.inf:
                    continue
                node = f'  n{t}_{i} [label="{label(token, value)}"{highlight if (t, i) in filled else ""}];'
                (lines if self.states[t] is None else clusters.setdefault(self.states[t][i], [])).append(node)
                source = "root" if t == 0 else f"n{t - 1}_{parent}"
                lines.append(f"  {source} -> n{t}_{i}" + (" [penwidth=3];" if (t, i) in bold else ";"))
        for q, nodes in sorted(clusters.items()):
            lines += [f"  subgraph cluster_state_{q} {{", f'    label="state {q}";', *nodes, "  }"]
        for k, (step, row, finished, logprob, _) in enumerate(ended):
            if finished:  # EOS: a node of its own
                source = "root" if step < 0 else f"n{step}_{row}"
                lines.append(f'  e{k} [label="{label(None, logprob)}"{highlight}];')
                lines.append(f"  {source} -> e{k}" + (" [penwidth=3];" if best and k == best[0] else ";"))
        return "\n".join([*lines, "}"]) + "\n"
