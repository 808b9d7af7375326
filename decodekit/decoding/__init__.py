"""Decoding strategies over the step protocol: one loop (:mod:`~decodekit.decoding.search`),
strategies as registered values (:data:`~.strategies.STRATEGIES`) whose selections live in
:mod:`~.rowwise` (greedy, sampling) and :mod:`~.beam` (beam search, Anderson-style constrained
beam search). Names are imported on first use, so that the registry's names (the CLI's
``--strategy`` choices) are read without importing torch.

Arguments every strategy takes: ``model``, any step-protocol model (with ``vocab`` when the
constraint is a pattern string); ``prompt``, one prompt (token ids) or a batch (a list of
lists); ``max_length``, the most tokens to generate, EOS included; ``constraint``, a regex the
continuation text must fully match, or a compiled ``TokenAutomaton`` (ConstraintError when
nothing can match in ``max_length`` tokens); ``record``, a
:class:`~decodekit.outputs.SearchTree` filled with what the search did (to draw it);
``max_memory``, the memory the search may use (default: ``DECODEKIT_MAX_MEMORY``, else 90 % of
the free memory): a search estimated to need more raises
:class:`~decodekit.decoding.memory.ResourceError` before it allocates anything, naming the largest
setting that fits (:mod:`decodekit.decoding.memory`). Each
returns a list of :class:`~decodekit.outputs.Hypothesis` for one prompt, a list of such lists
for a batch; invalid arguments raise :class:`~decodekit.errors.ConfigError` naming them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from decodekit.util.lazy import lazy_exports

_LAZY = {
    "SearchTree": "decodekit.outputs",
    "beam_search": "decodekit.decoding.beam",
    "constrained_beam_search": "decodekit.decoding.beam",
    "greedy": "decodekit.decoding.rowwise",
    "sample": "decodekit.decoding.rowwise",
}
__all__ = ["SearchTree", "beam_search", "constrained_beam_search", "greedy", "sample"]

if TYPE_CHECKING:
    from decodekit.decoding.beam import beam_search, constrained_beam_search
    from decodekit.decoding.rowwise import greedy, sample
    from decodekit.outputs import SearchTree


__getattr__, __dir__ = lazy_exports(globals(), _LAZY)
