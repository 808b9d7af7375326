"""Decoding strategies over the step protocol: one loop (:mod:`~decodekit.decoding.search`),
strategies as selection functions (rowwise, beam, grid)."""

from decodekit.decoding.beam import beam_search
from decodekit.decoding.grid import constrained_beam_search
from decodekit.decoding.rowwise import greedy, sample

__all__ = ["beam_search", "constrained_beam_search", "greedy", "sample"]
