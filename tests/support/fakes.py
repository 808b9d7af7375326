"""Tiny hand-written step-protocol models (no nn.Module) and an exhaustive-search oracle."""

from __future__ import annotations

import contextlib
import itertools
import math
import os

import torch

from decodekit.vocab import Vocab


class TableLM:
    """A bigram model: logprobs of the next token = table[last token]. State: last token [N]."""

    def __init__(self, table: torch.Tensor, bos_id: int | None = 0, eos_id: int | None = 0, vocab=None):
        self.table = torch.log_softmax(table.double(), -1).float()  # [V, V]
        self.vocab_size = table.shape[0]
        self.bos_id, self.eos_id, self.vocab = bos_id, eos_id, vocab
        self.calls = 0

    def initial_state(self, batch_size: int):
        return torch.full((batch_size,), -1, dtype=torch.long)

    def step(self, state, tokens):
        self.calls += 1
        return self.table[tokens], tokens.clone()


class HistoryLM:
    """The next-token distribution depends on the whole history (a hash of it), so any wrong
    reordering of states changes the answer. State: (rolling hash [N] int64, length [N])."""

    def __init__(
        self,
        vocab_size: int,
        seed: int = 0,
        bos_id: int | None = 0,
        eos_id: int | None = 0,
        sharpness: float = 2.0,
        vocab=None,
    ):
        self.vocab_size, self.bos_id, self.eos_id, self.vocab = vocab_size, bos_id, eos_id, vocab
        self.seed, self.sharpness = seed, sharpness
        self.calls = 0

    def initial_state(self, batch_size: int):
        return (torch.zeros(batch_size, dtype=torch.long), torch.zeros(batch_size, dtype=torch.long))

    def _dist(self, h: int) -> torch.Tensor:
        g = torch.Generator().manual_seed((h * 7919 + self.seed) % (2**62))
        return torch.log_softmax(
            self.sharpness * torch.randn(self.vocab_size, generator=g, dtype=torch.float64), -1
        )

    def step(self, state, tokens):
        self.calls += 1
        h, n = state
        h = (h * 1000003 + tokens + 1) % (2**61 - 1)
        logprobs = torch.stack([self._dist(int(x)) for x in h]).float()
        return logprobs, (h, n + 1)


def step_through(model, tokens):
    """Step ``model`` from its initial state through ``tokens`` [N, T]: (the last log-probabilities
    [N, V], the state)."""
    state = model.initial_state(tokens.shape[0])
    for t in range(tokens.shape[1]):
        logprobs, state = model.step(state, tokens[:, t])
    return logprobs, state


def sequence_logprob(model, prompt, tokens) -> float:
    """Log-probability of ``tokens`` after ``prompt``, stepping one row (float64 sum)."""
    seq = ([model.bos_id] if model.bos_id is not None else []) + list(prompt)
    state = model.initial_state(1)
    for x in seq:
        lp, state = model.step(state, torch.tensor([x]))
    total = 0.0
    for x in tokens:
        total += float(lp[0, x])
        lp, state = model.step(state, torch.tensor([x]))
    return total


def all_completions(model, prompt, max_length: int):
    """Every output the searches can return: (tokens, logprob, n_tokens_with_eos, finished).

    Finished: content + EOS with total length <= max_length; unfinished: exactly max_length
    content tokens."""
    content = [v for v in range(model.vocab_size) if v != model.eos_id]
    out = []
    for n in range(max_length + 1):
        for seq in itertools.product(content, repeat=n):
            if model.eos_id is not None and n + 1 <= max_length:
                lp = sequence_logprob(model, prompt, (*seq, model.eos_id))
                out.append((seq, lp, n + 1, True))
            if n == max_length:
                out.append((seq, sequence_logprob(model, prompt, seq), n, False))
    return out


def score(logprob: float, length: int, alpha: float) -> float:
    return logprob / max(length, 1) ** alpha


def word_vocab(words):
    from decodekit.vocab import WordVocab

    return WordVocab(["<unk>", "<eos>", *words])


def char_vocab(chars: str) -> Vocab:
    from decodekit.vocab import CharVocab

    return CharVocab(["<unk>", "<eos>", *chars])


def byte_bpe(texts, vocab_size: int, bos: bool = True):
    """A byte-level BPE (GPT-2's scheme: all 256 bytes, merges over UTF-8) trained on ``texts``,
    as a transformers fast tokenizer with ``<|endoftext|>`` as EOS (and BOS when ``bos``)."""
    import tokenizers
    import transformers

    trained = tokenizers.ByteLevelBPETokenizer()
    trained.train_from_iterator(texts, vocab_size=vocab_size, min_frequency=1, special_tokens=[EOT])
    extra = {"bos_token": EOT} if bos else {}
    return transformers.PreTrainedTokenizerFast(tokenizer_object=trained._tokenizer, eos_token=EOT, **extra)


def tiny_gpt2(texts, vocab_size: int = 300):
    """(model, tokenizer): a seeded 1-layer random GPT-2 (eval mode) over a byte-level BPE of
    ``vocab_size`` trained on ``texts`` (EOS ``<|endoftext|>``, id 0)."""
    import transformers

    tok = byte_bpe(texts, vocab_size, bos=False)
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        vocab_size=len(tok), n_positions=64, n_embd=16, n_layer=1, n_head=2, bos_token_id=0, eos_token_id=0
    )
    return transformers.GPT2LMHeadModel(config).eval(), tok


def generate_with(model, tok, processor, prompt: str, max_new_tokens: int, **options) -> list[list[int]]:
    """``model.generate`` on ``prompt`` with ``processor`` as its only logits processor: the new
    tokens of each returned row, EOS and padding dropped."""
    import transformers

    inputs = tok([prompt], return_tensors="pt")
    out = model.generate(
        **inputs,
        logits_processor=transformers.LogitsProcessorList([processor]),
        max_new_tokens=max_new_tokens,
        pad_token_id=tok.eos_token_id,
        **options,
    )
    new = out[:, inputs["input_ids"].shape[1] :]
    return [row[row != tok.eos_token_id].tolist() for row in new]


def save_tiny_gpt2(path, texts, vocab_size: int):
    """A seeded 1-layer GPT-2 and its byte-level BPE saved in ``path`` (a transformers directory)."""
    import transformers

    tok = byte_bpe(texts, vocab_size, bos=False)
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        vocab_size=len(tok), n_positions=64, n_embd=16, n_layer=1, n_head=2, bos_token_id=0, eos_token_id=0
    )
    transformers.GPT2LMHeadModel(config).save_pretrained(path)
    tok.save_pretrained(path)
    return path


EOT = "<|endoftext|>"
__all__ = ["TableLM", "HistoryLM", "all_completions", "sequence_logprob", "score", "math"]


@contextlib.contextmanager
def held_by_another_process(path):
    """A forked child holds decodekit's exclusive lock on ``path`` for the duration of the block
    (a second writer's view of a running job). Yields the child's pid."""
    from decodekit.util.locking import exclusive

    ready_r, ready_w = os.pipe()
    done_r, done_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the first writer: holds the lock until told to stop
        try:
            with exclusive(path):
                os.write(ready_w, b"x")
                os.read(done_r, 1)
        finally:
            os._exit(0)
    try:
        os.read(ready_r, 1)
        yield pid
    finally:
        os.write(done_w, b"x")
        os.waitpid(pid, 0)
