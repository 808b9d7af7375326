"""Back-off n-gram language models through the step protocol.

The model is stored, as KenLM and SRILM store it, in back-off form: the log-probability of every
seen n-gram and a back-off weight for every context, so that ``p(w | h) = P(h w)`` if ``h w`` was
seen, else ``bo(h) p(w | h')`` (h' = h minus its oldest word). Models trained by
:func:`decodekit.models.kneser_ney.train_kneser_ney` and models read from ARPA files
(:mod:`decodekit.models.arpa`) are this class; both modules import this one, never the reverse.

Sentences: ``<eos>`` ends a sentence and also starts the next one (``bos_id == eos_id``, the
PTB convention); as in SRILM/KenLM (``<s> ... </s>``) no n-gram reaches back over a sentence start,
so the context is cut after its last ``<eos>``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from decodekit.errors import DecodekitError
from decodekit.vocab import Vocab

__all__ = ["NgramLM"]


class NgramLM:
    """A back-off n-gram LM over ids ``0 .. V-1``. State: the last n-1 token ids [N, n-1] (long).

    Tables, one per order k = 1..n (M_k entries, sorted by (context index, word)):
    ``keys[k]`` int64 [M_k] = context index in table k-1 times V plus the word (``keys[1] = arange(V)``),
    ``logp[k]`` float32 [M_k] natural-log probability, ``logbo[k]`` float32 [M_k] natural-log
    back-off weight of the entry as a context (0 when it is none), ``starts[k]`` int64 [M_{k-1}+1]:
    the entries of table k with context c are ``starts[k][c] : starts[k][c+1]``.

    Args:
        keys, logp, logbo: lists indexed by order - 1.
        vocab_size: V.
        eos_id: the sentence boundary id (also ``bos_id``), or None (no sentences).
        vocab: optional :class:`~decodekit.vocab.Vocab` for text in/out and ARPA files.
    """

    def __init__(
        self,
        keys: Sequence[torch.Tensor],
        logp: Sequence[torch.Tensor],
        logbo: Sequence[torch.Tensor],
        vocab_size: int,
        eos_id: int | None,
        vocab: Vocab | None = None,
    ) -> None:
        if vocab is not None and len(vocab) != vocab_size:
            raise DecodekitError(f"vocabulary has {len(vocab)} tokens, the n-gram tables {vocab_size}")
        self.order = len(keys)
        self.vocab_size, self.vocab = vocab_size, vocab
        self.bos_id = self.eos_id = eos_id
        self.keys = [k.long() for k in keys]
        self.logp = [p.float() for p in logp]
        self.logbo = [b.float() for b in logbo]
        self.starts = [torch.zeros(1, dtype=torch.long)]
        for k in range(1, self.order):
            ctx = torch.arange(len(self.keys[k - 1]) + 1, dtype=torch.long) * vocab_size
            self.starts.append(torch.searchsorted(self.keys[k], ctx))
        self.device = torch.device("cpu")
        self.discounts: list[tuple[float, float, float]] | None = None  # set by train_kneser_ney

    def __repr__(self) -> str:
        sizes = ", ".join(str(len(k)) for k in self.keys)
        return f"NgramLM(order={self.order}, vocab_size={self.vocab_size}, ngrams=[{sizes}])"

    def to(self, device: str | torch.device) -> NgramLM:
        """Move the tables (in place) and return self."""
        self.device = torch.device(device)
        for name in ("keys", "logp", "logbo", "starts"):
            setattr(self, name, [t.to(self.device) for t in getattr(self, name)])
        return self

    # ---- the step protocol -------------------------------------------------------------------

    def initial_state(self, batch_size: int) -> torch.Tensor:
        """n-1 ``eos`` ids per row [B, n-1]: the context of a sentence start after ``bos``
        (without an eos: -1, "no token", which no context reaches back over)."""
        fill = -1 if self.eos_id is None else self.eos_id
        return torch.full((batch_size, self.order - 1), fill, dtype=torch.long, device=self.device)

    def step(self, state: torch.Tensor, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Args: state [N, n-1], tokens [N]. Returns (logprobs [N, V] of the next token, state)."""
        new = torch.cat([state, tokens.view(-1, 1).to(state)], dim=1)[:, 1:]  # [N, n-1]
        return self.next_logprobs(new), new

    def prefill(self, state: torch.Tensor, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Args: state [N, n-1], tokens [N, T]. Only the last n-1 tokens matter."""
        new = torch.cat([state, tokens.to(state)], dim=1)[:, tokens.shape[1] :]  # [N, n-1]
        return self.next_logprobs(new), new

    def step_many(
        self, state: torch.Tensor, tokens: torch.Tensor, keep_last: int | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """All L positions (or the last ``keep_last``) in one table lookup. Args: state [N, n-1],
        tokens [N, L]. Returns (logprobs [N, L or keep_last, V] after each token, state)."""
        m, (n_rows, L) = self.order - 1, tokens.shape
        hist = torch.cat([state, tokens.to(state)], dim=1)  # [N, n-1+L]
        windows = hist.unfold(1, m, 1)[:, 1:] if m else hist.new_zeros(n_rows, L, 0)  # [N, L, n-1]
        kept = L if keep_last is None else keep_last
        state = hist[:, hist.shape[1] - m :]
        if kept == 0:
            return hist.new_zeros(n_rows, 0, self.vocab_size, dtype=self.logp[0].dtype), state
        logprobs = self.next_logprobs(windows[:, L - kept :].reshape(n_rows * kept, m))
        return logprobs.view(n_rows, kept, self.vocab_size), state

    def next_logprobs(self, history: torch.Tensor) -> torch.Tensor:
        """Args: history [N, n-1] ids, oldest first. Returns logprobs [N, V]:
        ``q_1 = log P_1``; ``q_k(w) = log P_k(h_k w)`` if seen else ``log bo(h_k) + q_{k-1}(w)``."""
        n_rows, V = history.shape[0], self.vocab_size
        out = self.logp[0].expand(n_rows, V).clone()  # [N, V]
        for k, ctx in enumerate(self._contexts(history), start=2):  # ctx [N]: index in table k-1
            rows = (ctx >= 0).nonzero().squeeze(1)
            if rows.numel() == 0:
                continue
            c = ctx[rows]
            out[rows] += self.logbo[k - 2][c].unsqueeze(1)
            start, end = self.starts[k - 1][c], self.starts[k - 1][c + 1]
            lengths = end - start
            total = int(lengths.sum())
            if total == 0:
                continue
            row_of = torch.repeat_interleave(rows, lengths)  # [E]
            offset = torch.arange(total, device=c.device) - torch.repeat_interleave(
                torch.cumsum(lengths, 0) - lengths, lengths
            )
            entry = torch.repeat_interleave(start, lengths) + offset  # [E]
            out[row_of, self.keys[k - 1][entry] % V] = self.logp[k - 1][entry]
        return out

    def _contexts(self, history: torch.Tensor) -> list[torch.Tensor]:
        """For k = 2..n the index in table k-1 of the last k-1 tokens of ``history`` [N, n-1]
        (-1: not a known context, or it reaches back over an ``eos`` or a -1). Returns n-1 tensors [N]."""
        n_rows, m = history.shape
        limit = torch.full((n_rows,), m, dtype=torch.long, device=history.device)  # usable length
        if m > 0:
            pos = torch.arange(m, device=history.device).expand(n_rows, m)
            absent = torch.where(history < 0, pos, -1).amax(1)  # [N]: last "no token", -1 if none
            limit = m - 1 - absent
            if self.eos_id is not None:
                last = torch.where(history == self.eos_id, pos, -1).amax(1)  # [N], -1 if none
                limit = torch.where(last >= 0, torch.minimum(limit, m - last), limit)
        found = []
        for length in range(1, m + 1):
            suffix = history[:, m - length :]  # [N, length]
            found.append(torch.where(limit >= length, self._lookup(suffix), -1))
        return found

    def _lookup(self, grams: torch.Tensor) -> torch.Tensor:
        """Index of each row of ``grams`` [N, L] in table L, or -1 (also for rows with a -1 id)."""
        idx = grams[:, 0].clone()
        for j in range(1, grams.shape[1]):
            keys = self.keys[j]
            if len(keys) == 0:
                return torch.full_like(idx, -1)
            key = idx.clamp(min=0) * self.vocab_size + grams[:, j]
            pos = torch.searchsorted(keys, key).clamp(max=len(keys) - 1)
            idx = torch.where((idx >= 0) & (keys[pos] == key), pos, -1)
        return idx

    # ---- stream scoring (see decodekit.models.scoring.stream_logprobs) ---------------------------

    def initial_logprobs(self, state: torch.Tensor) -> torch.Tensor:
        """The distribution of the first token before any is fed: logprobs [N, V] (an n-gram model
        without sentence markers predicts it from the empty context)."""
        return self.next_logprobs(state)

    def target_logprobs(
        self, state: torch.Tensor, inputs: torch.Tensor, targets: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``log p(targets[:, t] | state, inputs[:, :t+1])``, vectorised over positions.

        Args: state [N, n-1]; inputs, targets [N, T]. Returns (logprobs [N, T] float32, state)."""
        m, (n_rows, T) = self.order - 1, inputs.shape
        hist = torch.cat([state, inputs.to(state)], dim=1)  # [N, n-1+T]
        # [N, T, n-1]: the history after each input
        windows = hist.unfold(1, m, 1)[:, 1:] if m else hist.new_zeros(n_rows, T, 0)
        logprobs = self.logprob(windows.reshape(n_rows * T, m), targets.reshape(-1).to(state))
        return logprobs.view(n_rows, T), hist[:, hist.shape[1] - m :]

    def logprob(self, history: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """log p(target | history) for rows of history [M, n-1] (oldest first) and target [M]."""
        q = self.logp[0][target]
        for k, ctx in enumerate(self._contexts(history), start=2):
            keys = self.keys[k - 1]
            if len(keys) == 0:
                break
            key = ctx.clamp(min=0) * self.vocab_size + target
            pos = torch.searchsorted(keys, key).clamp(max=len(keys) - 1)
            seen = (ctx >= 0) & (keys[pos] == key)
            backed = q + torch.where(ctx >= 0, self.logbo[k - 2][ctx.clamp(min=0)], 0.0)
            q = torch.where(seen, self.logp[k - 1][pos], backed)
        return q

    def ngram_ids(self, k: int) -> torch.Tensor:
        """The token ids of every entry of table k: [M_k, k], in table order."""
        grams = torch.arange(self.vocab_size, device=self.device).view(-1, 1)  # [V, 1]
        for j in range(1, k):  # grams: the entries of table j -> those of table j+1
            keys = self.keys[j]
            grams = torch.cat([grams[keys // self.vocab_size], (keys % self.vocab_size).view(-1, 1)], 1)
        return grams
