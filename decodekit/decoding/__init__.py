"""Decoding strategies over the step protocol: one loop (:mod:`~decodekit.decoding.search`),
strategies as selection functions (:mod:`~.rowwise`: greedy, sampling; :mod:`~.beam`: beam
search, Anderson-style constrained beam search).

Arguments every strategy takes: ``model``, any step-protocol model (with ``vocab`` when the
constraint is a pattern string); ``prompt``, one prompt (token ids) or a batch (a list of
lists); ``max_length``, the most tokens to generate, EOS included; ``constraint``, a regex the
continuation text must fully match, or a compiled ``TokenAutomaton`` (ConstraintError when
nothing can match in ``max_length`` tokens); ``record``, a
:class:`~decodekit.outputs.SearchTree` filled with what the search did (to draw it);
``max_memory``, the memory the search may use (default: ``DECODEKIT_MAX_MEMORY``, else 90 % of
the free memory): a search estimated to need more raises
:class:`~decodekit.memory.ResourceError` before it allocates anything, naming the largest
setting that fits (:mod:`decodekit.memory`). Each
returns a list of :class:`~decodekit.outputs.Hypothesis` for one prompt, a list of such lists
for a batch; invalid arguments raise :class:`~decodekit.errors.ConfigError` naming them.
"""

from decodekit.decoding.beam import beam_search, constrained_beam_search
from decodekit.decoding.rowwise import greedy, sample
from decodekit.outputs import SearchTree

__all__ = ["SearchTree", "beam_search", "constrained_beam_search", "greedy", "sample"]
