"""decodekit's exact constraints inside transformers' ``model.generate`` (or any loop of yours).

:class:`ConstraintLogitsProcessor` carries a regex, several regexes (all must fully match),
excludes (none may match anywhere), a JSON Schema or a :class:`~decodekit.Grammar`, compiled
by decodekit over the tokenizer's token bytes, as a transformers ``LogitsProcessor``::

    processor = ConstraintLogitsProcessor(r"\\d{4}-\\d{2}-\\d{2}", tokenizer, max_new_tokens=12)
    out = model.generate(**inputs, logits_processor=[processor], max_new_tokens=12)

**Beam-aware.** transformers' beam search reorders, drops and duplicates rows between calls, so
a processor that keeps one automaton state per row index masks the wrong rows. This one keeps no
row state: a row's automaton state is a function of the tokens it generated, looked up in a
table keyed by those tokens (each prefix's state computed once, from its parent prefix's), so
any reordering is right by construction. A processor may serve several ``generate`` calls: a
call whose rows do not each extend a row of the previous call by one token starts afresh (a new
prompt, whatever its length).

**Exact lengths.** With ``max_new_tokens`` (the same as ``generate``'s), a token is allowed only
if acceptance stays reachable in the tokens left, so the text matches when generation stops at
the limit as well as at EOS. Without it the masks do not look at the length (the output matches
whenever it ends with EOS).

Rows whose automaton is dead (after EOS, when transformers pads finished rows) allow EOS only,
so sampling never sees an all ``-inf`` row. A live row with no token left that keeps a match
reachable (no match fits in ``max_new_tokens``) is never handed to transformers:
:class:`~decodekit.errors.ConstraintError` at construction when that is known then (the shortest
match needs more than ``max_new_tokens`` tokens), else at that call. The same masks from a loop of your own:
:meth:`ConstraintLogitsProcessor.mask` takes ``(logits [N, V], generated token lists)``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from decodekit.constraints import compile_regex, json_schema
from decodekit.errors import ConstraintError
from decodekit.models.hf import prepared_vocab

NEG_INF = float("-inf")


class ConstraintLogitsProcessor:
    """A transformers ``LogitsProcessor`` masking every token that cannot lead to a text that
    fully matches ``constraint`` (a regex, or a list of regexes that must all match) and
    contains no match of ``exclude``; or, with ``json_schema=``, JSON that validates.

    Args:
        constraint: a regex (Python ``regex`` syntax, read exactly), a list of them, or None
            (with ``exclude`` or ``json_schema``).
        tokenizer: the model's transformers tokenizer (its tokens' bytes are read as
            :class:`decodekit.models.hf.HFVocab` does; byte-level BPEs split characters exactly).
        vocab_size: the width V of the model's logits (default: the first call's), which may
            exceed ``len(tokenizer)``.
        exclude: regexes that must match nowhere in the generated text.
        json_schema: a JSON Schema (dict or JSON text), instead of ``constraint``.
        max_new_tokens: ``generate``'s limit, for exact masks near it (see the module doc).
    """

    def __init__(
        self,
        constraint: str | Sequence[str] | None,
        tokenizer,
        *,
        vocab_size: int | None = None,
        exclude: str | Sequence[str] = (),
        json_schema: dict | str | None = None,
        max_new_tokens: int | None = None,
    ) -> None:
        if (constraint is None) == (json_schema is None) and not exclude:
            raise ConstraintError("give a constraint or a json_schema (one of them), or excludes")
        if constraint is not None and json_schema is not None:
            raise ConstraintError("give either a constraint or a json_schema, not both")
        if tokenizer is None or not hasattr(tokenizer, "convert_ids_to_tokens"):
            raise ConstraintError(
                f"tokenizer must be the model's transformers tokenizer, got {type(tokenizer).__name__}"
            )
        for name, value in (("max_new_tokens", max_new_tokens), ("vocab_size", vocab_size)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ConstraintError(f"{name} must be a positive integer or None, got {value!r}")
        self.patterns = constraint if json_schema is None else _schema_regex(json_schema)
        self.exclude = (exclude,) if isinstance(exclude, str) else tuple(exclude)
        self.tokenizer, self.max_new_tokens = tokenizer, max_new_tokens
        self._width_given = vocab_size is not None
        # compiled now (a bad regex or a match that cannot fit is said here, not inside generate),
        # for the given width or the tokenizer's; a wider first call compiles again
        self.automaton = self._compile(vocab_size or len(tokenizer))
        if max_new_tokens is not None and not self.automaton.fits(max_new_tokens):
            raise ConstraintError(
                f"no text matching {self.automaton.pattern!r} fits in max_new_tokens={max_new_tokens} "
                f"tokens of this tokenizer (the shortest needs {self.automaton.shortest}): "
                "raise max_new_tokens"
            )
        self._start: int | None = None
        self._rows: set[tuple[int, ...]] = set()  # the previous call's rows (prompt included)
        self._states: dict[tuple[int, ...], int] = {}

    def _compile(self, vocab_size: int):
        vocab = prepared_vocab(self.tokenizer, vocab_size)
        patterns = () if self.patterns is None else self.patterns
        if isinstance(patterns, (list, tuple)) and not patterns:
            patterns = r"(?s:.*)"  # excludes only: any text but
        return compile_regex(
            patterns, vocab.surface_bytes(), vocab.eos_id, "", exclude=self.exclude, lazy="masked"
        )

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        """transformers' call: ``input_ids`` [N, prompt + generated], ``scores`` [N, V]; returns
        the masked scores (a new tensor)."""
        rows = [tuple(r) for r in input_ids.tolist()]
        if self._start is None or not all(r[:-1] in self._rows for r in rows):  # a new generation
            self._start, self._states = input_ids.shape[1], {}
        self._rows = set(rows)
        return self.mask(scores, [r[self._start :] for r in rows])

    def mask(self, logits: torch.Tensor, generated: Sequence[Sequence[int]]) -> torch.Tensor:
        """``logits`` [N, V] with -inf for every token row i may not emit next, given the tokens
        ``generated[i]`` it has emitted so far (not the prompt)."""
        if self.automaton.vocab_size != logits.shape[-1]:  # the tokenizer's width assumed, not given
            if self._width_given or logits.shape[-1] < self.automaton.vocab_size:
                raise ConstraintError(
                    f"the logits have {logits.shape[-1]:,} columns but the constraint was compiled for "
                    f"{self.automaton.vocab_size:,} tokens: pass the model's vocab_size"
                )
            self.automaton = self._compile(logits.shape[-1])
        a = self.automaton.to(logits.device)
        if logits.shape[-1] != a.vocab_size:
            raise ConstraintError(
                f"the logits have {logits.shape[-1]:,} columns but the constraint was compiled for "
                f"{a.vocab_size:,} tokens: pass the model's vocab_size"
            )
        states = torch.tensor(self._lookup([tuple(g) for g in generated]), dtype=torch.long)
        remaining = None
        if self.max_new_tokens is not None:
            remaining = torch.tensor([max(self.max_new_tokens - len(g), 0) for g in generated])
        out = a.mask(logits.float() if logits.dtype != torch.float32 else logits, states, remaining)
        dead = states < 0
        if a.eos_id is not None and bool(dead.any()):  # a finished row: EOS only, never all -inf
            out[dead] = NEG_INF
            out[dead, a.eos_id] = 0.0
        stuck = ~dead & (out.amax(dim=-1) == NEG_INF)  # one pass over [N, V] (isfinite: two, 5x the time)
        if bool(stuck.any()):  # a live row with nothing allowed: transformers would pick any token
            row = int(stuck.nonzero()[0, 0])
            left = "" if remaining is None else f" in the {int(remaining[row])} token(s) left"
            raise ConstraintError(
                f"row {row} can no longer reach a text matching {a.pattern!r}{left}: no token is allowed "
                "(raise max_new_tokens; the processor's max_new_tokens must be generate's)"
            )
        return out.to(logits.dtype)

    def _lookup(self, keys: list[tuple[int, ...]]) -> list[int]:
        """The automaton state of each generated prefix, each new one stepped from its parent's
        (a prefix whose parent was not seen at the last call is walked from the start). Only this
        call's prefixes are kept: the next call's parents are among them, so the table holds the
        live rows, not every prefix ever generated."""
        a, table = self.automaton, self._states
        table.setdefault((), a.initial)
        new = [k for k in dict.fromkeys(keys) if k not in table]
        ready = [k for k in new if k[:-1] in table]
        if ready:
            parents = torch.tensor([table[k[:-1]] for k in ready])
            steps = a.step(parents, torch.tensor([k[-1] for k in ready])).tolist()
            table.update(zip(ready, steps))
        for k in new:
            if k not in table:
                table[k] = a.walk(k)
        self._states = {k: table[k] for k in keys}
        return [table[k] for k in keys]


def _schema_regex(schema: dict | str) -> str:
    import json

    return json_schema(json.loads(schema) if isinstance(schema, str) else schema)
