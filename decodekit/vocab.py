"""Vocabularies: token strings <-> ids, and each token's surface text.

The contract the rest of decodekit relies on (decoding renders text with it, the regex
constraints compile against it)::

    vocab.decode(ids) == vocab.separator.join(vocab.surface(i) for i in ids if not special)

Word vocabularies join words with a single space (``separator=" "``); character
vocabularies concatenate (``separator=""``). Special tokens (``<eos>``, ``<unk>``, ...)
have no surface text: ``surface(i)`` is ``None`` and they are skipped when rendering,
except ``<unk>``, which renders as its own string so that unknown words stay visible.
"""

from __future__ import annotations

import collections
import hashlib
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path

from decodekit.errors import ConfigError

UNK = "<unk>"
EOS = "<eos>"


class Vocab:
    """An ordered list of token strings with a separator and a set of special tokens.

    Args:
        tokens: the token strings; id ``i`` is ``tokens[i]``. Must be unique.
        separator: text inserted between consecutive tokens when rendering.
        eos: the end-of-sequence token string, or None.
        unk: the unknown-token string, or None (then unknown input is an error).
        specials: further tokens that never appear in text (e.g. padding).
    """

    kind = "generic"

    def __init__(
        self,
        tokens: Sequence[str],
        *,
        separator: str,
        eos: str | None = EOS,
        unk: str | None = UNK,
        specials: Iterable[str] = (),
    ) -> None:
        self.tokens: list[str] = list(tokens)
        self.index: dict[str, int] = {t: i for i, t in enumerate(self.tokens)}
        if len(self.index) != len(self.tokens):
            dup = [t for t, c in collections.Counter(self.tokens).items() if c > 1][:5]
            raise ConfigError(f"duplicate tokens in vocabulary: {dup}")
        self.separator = separator
        self.eos_id = self._id_of(eos, "eos")
        self.unk_id = self._id_of(unk, "unk")
        self.special_ids = frozenset(
            [i for i in (self.eos_id, self.unk_id) if i is not None]
            + [self._id_of(s, "special") for s in specials]
        )

    def _id_of(self, token: str | None, role: str) -> int | None:
        if token is None:
            return None
        if token not in self.index:
            raise ConfigError(f"the {role} token {token!r} is not in the vocabulary")
        return self.index[token]

    def __len__(self) -> int:
        return len(self.tokens)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Vocab) and self.fingerprint == other.fingerprint

    def __hash__(self) -> int:
        return hash(self.fingerprint)

    @property
    def fingerprint(self) -> str:
        """A sha256 over kind, separator, specials and tokens: equal iff the vocabularies are."""
        h = hashlib.sha256()
        h.update(f"{self.kind}\0{self.separator}\0{sorted(self.special_ids)}\0".encode())
        for t in self.tokens:
            h.update(t.encode("utf-8", "surrogatepass") + b"\0")
        return h.hexdigest()

    def surface(self, i: int) -> str | None:
        """The text token ``i`` contributes to the output, or None for specials (``<unk>`` aside)."""
        if i == self.unk_id:
            return self.tokens[i]
        return None if i in self.special_ids else self.tokens[i]

    def surfaces(self) -> tuple[str | None, ...]:
        """``(surface(i) for i in range(len(self)))``, as the regex constraints need it.

        ``<unk>`` is None here: a constrained output never contains an unknown token. The same
        tuple is returned every time, so the constraint cache recognises it without rehashing."""
        if getattr(self, "_surfaces", None) is None:
            self._surfaces = tuple(None if i in self.special_ids else t for i, t in enumerate(self.tokens))
        return self._surfaces

    def surface_bytes(self) -> tuple[bytes | None, ...]:
        """Each token's text as bytes (None: a special token, or text with a lone surrogate): what
        regex constraints compile against. Here the UTF-8 encoding of :meth:`surfaces`; byte-level
        vocabularies (:class:`decodekit.models.hf.HFVocab`) give each token's own bytes, which
        may be part of a character. The same tuple is returned every time."""
        if getattr(self, "_surface_bytes", None) is None:
            self._surface_bytes = tuple(_utf8(s) for s in self.surfaces())
        return self._surface_bytes

    def split(self, text: str) -> list[str]:
        """Split text into token strings (words on whitespace, or characters)."""
        raise NotImplementedError

    def encode(self, text: str, *, warn_unknown: bool = True, case_fallback: bool = True) -> list[int]:
        """Text -> ids. Unknown tokens map to ``<unk>`` (with a warning) or raise if there is none.

        ``case_fallback``: an unknown token whose lower-cased form is in the vocabulary maps to
        that form (with a warning), so that "The Company" is not all ``<unk>`` for a lower-case
        vocabulary such as PTB's."""
        ids, unknown, folded = [], [], []
        for tok in self.split(text):
            i = self.index.get(tok)
            if i is None and case_fallback and tok != tok.lower():
                i = self.index.get(tok.lower())
                if i in self.special_ids:
                    i = None  # "<UNK>" is an unknown word, not the <unk> token
                elif i is not None:
                    folded.append(tok)
            if i is None or (i in self.special_ids and i != self.unk_id and i != self.eos_id):
                if self.unk_id is None:
                    raise ConfigError(f"{tok!r} is not in the vocabulary and the vocabulary has no <unk>")
                unknown.append(tok)
                i = self.unk_id
            ids.append(i)
        if folded and warn_unknown:
            shown = ", ".join(repr(u) for u in folded[:5])
            message = f"{len(folded)} token(s) lower-cased to match the vocabulary: {shown}"
            warnings.warn(message, stacklevel=2)
        if unknown and warn_unknown:
            shown = ", ".join(repr(u) for u in unknown[:5])
            warnings.warn(f"{len(unknown)} unknown token(s) mapped to <unk>: {shown}", stacklevel=2)
        return ids

    def decode(self, ids: Iterable[int]) -> str:
        """Ids -> text, skipping special tokens other than ``<unk>``."""
        parts = []
        for i in ids:
            s = self.surface(int(i))
            if s is not None:
                parts.append(s)
        return self.separator.join(parts)

    def save(self, path: str | Path) -> None:
        """Write the vocabulary as UTF-8 text: a header line, then one token per line."""
        header = {
            "kind": self.kind,
            "eos": None if self.eos_id is None else self.tokens[self.eos_id],
            "unk": None if self.unk_id is None else self.tokens[self.unk_id],
        }
        import json

        lines = [json.dumps(header)] + [json.dumps(t) for t in self.tokens]
        Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")

    @staticmethod
    def load(
        path: str | Path, *, max_bytes: int | None = None, allowed_sizes: Iterable[int] | None = None
    ) -> Vocab:
        """Read a file written by :meth:`save` (JSON strings only: nothing is executed).

        Only a regular file is read (not a FIFO or a device), of at most ``max_bytes`` (default
        512 MiB); with ``allowed_sizes``, a file whose token count is not among them is refused
        before any line is parsed (a checkpoint's tensor shapes give the sizes it can have)."""
        import json

        from decodekit.util.files import MiB, read_bytes

        try:
            data = read_bytes(path, "the vocabulary file", max_bytes=max_bytes or 512 * MiB, error=ValueError)
        except OSError as e:
            raise ConfigError(f"cannot read vocabulary file {path}: {e.strerror or e}") from None
        if allowed_sizes is not None:
            count = data.count(b"\n") + (not data.endswith(b"\n")) - 1  # lines less the header
            if count not in set(allowed_sizes):
                raise ConfigError(
                    f"vocabulary file {path} lists {count:,} tokens, a size no tensor of the model has"
                )
        try:
            lines = data.decode("utf-8").splitlines()
            header = json.loads(lines[0])
            tokens = [json.loads(line) for line in lines[1:]]
            cls = {"word": WordVocab, "char": CharVocab}[header["kind"]]
            if not all(isinstance(t, str) for t in tokens):
                raise ConfigError("non-string token")
            return cls(tokens, eos=header["eos"], unk=header["unk"])
        except (IndexError, KeyError, ValueError, TypeError, RecursionError) as e:
            raise ConfigError(f"cannot read vocabulary file {path}: {str(e)[:200]}") from e


def _utf8(text: str | None) -> bytes | None:
    if text is None:
        return None
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: no UTF-8 text contains it
        return None


class WordVocab(Vocab):
    """Whitespace-separated words; text renders with single spaces between words."""

    kind = "word"

    def __init__(self, tokens: Sequence[str], *, eos: str | None = EOS, unk: str | None = UNK) -> None:
        super().__init__(tokens, separator=" ", eos=eos, unk=unk)

    def split(self, text: str) -> list[str]:
        return text.split()

    @classmethod
    def build(
        cls,
        words: Iterable[str],
        *,
        min_count: int = 1,
        max_size: int | None = None,
        eos: str | None = EOS,
        unk: str | None = UNK,
    ) -> WordVocab:
        """Build from a word stream: specials first, then words by decreasing frequency
        (ties alphabetical), keeping words seen at least ``min_count`` times, at most
        ``max_size`` entries in all."""
        counts = collections.Counter(words)
        specials = [t for t in (unk, eos) if t is not None]
        for s in specials:
            counts.pop(s, None)
        kept = sorted((w for w, c in counts.items() if c >= min_count), key=lambda w: (-counts[w], w))
        if max_size is not None:
            kept = kept[: max(0, max_size - len(specials))]
        return cls(specials + kept, eos=eos, unk=unk)


class CharVocab(Vocab):
    """Characters; text renders by concatenation."""

    kind = "char"

    def __init__(self, tokens: Sequence[str], *, eos: str | None = EOS, unk: str | None = UNK) -> None:
        super().__init__(tokens, separator="", eos=eos, unk=unk)
        bad = [t for t in self.tokens if len(t) != 1 and self.index[t] not in self.special_ids]
        if bad:
            raise ConfigError(f"character vocabulary entries must be single characters: {bad[:5]}")

    def split(self, text: str) -> list[str]:
        return list(text)

    @classmethod
    def build(cls, text: str, *, eos: str | None = EOS, unk: str | None = UNK) -> CharVocab:
        """Build from text: specials first, then the distinct characters in code-point order."""
        specials = [t for t in (unk, eos) if t is not None]
        return cls(specials + sorted(set(text) - set(specials)), eos=eos, unk=unk)
