"""A transformers causal LM (``AutoModelForCausalLM``) as a step-protocol model.

Needs the optional extra ``decodekit[hf]`` (transformers); nothing else in decodekit imports it.

* State: :class:`HFState` = (the model's key/value ``Cache``, attention mask [N, L], next
  position [N]). ``step`` never mutates a state: it runs the model on a shallow copy of the cache
  (transformers' ``DynamicLayer.update`` concatenates into new tensors, so the old ones survive).
* ``reorder_state`` index-selects every layer's keys/values (out of place, like transformers'
  ``reorder_cache``); ``concat_states`` left-pads shorter caches and masks the padding, the same
  layout as ``generate`` with left padding (positions count real tokens only).
* Position limit: ``max_positions`` is the model's ``n_positions`` / ``max_position_embeddings``
  (None if its config names none). Running past it is a one-line :class:`DecodekitError` naming
  the limit, never an ``IndexError``; perplexity of a longer stream is computed in windows of
  ``max_positions`` tokens advancing by ``stride`` (default half the limit;
  :func:`decodekit.models.scoring.stream_logprobs`).
* Text: :class:`HFVocab` exposes the tokenizer's tokens. Regex constraints compile against each
  token's bytes (:meth:`HFVocab.surface_bytes`): for byte-level BPE (GPT-2, Llama-3, Qwen...) the
  bytes the token stands for, which may be part of a multi-byte character, so a character may be
  spelled across tokens; for other tokenizers the UTF-8 text of the token, byte-fallback tokens
  (``<0xE4>``) being their byte. ``b"".join(surface_bytes) .decode() == tokenizer.decode(ids)``.
  :meth:`HFVocab.surface` (for display) is the token's text, None for a part of a character.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import io
import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from decodekit.errors import DecodekitError
from decodekit.models.gpt2 import native_model
from decodekit.util.files import MiB, check_regular, read_bytes
from decodekit.vocab import Vocab

__all__ = ["HFState", "HFVocab", "HuggingFaceLM", "load_hf"]

NATIVE_GPT2 = True  # a plain GPT-2 directory runs decodekit's own forward (models/gpt2.py)


@dataclass(frozen=True)
class HFState:
    """cache: a transformers ``Cache`` (keys/values [N, heads, L, d] per layer); mask [N, L] long
    (0 = left padding); position [N] long, the position id of the next token."""

    cache: Any
    mask: torch.Tensor
    position: torch.Tensor


def _layers(cache) -> list:
    layers = getattr(cache, "layers", None)
    if layers is None or not all(hasattr(layer, "keys") and hasattr(layer, "values") for layer in layers):
        raise DecodekitError(
            f"unsupported cache type {type(cache).__name__}: HuggingFaceLM needs a transformers>=4.56 "
            "DynamicCache (a list of layers with .keys/.values)"
        )
    return layers


def _map_cache(cache, fn) -> Any:
    """A shallow copy of ``cache`` whose layers' keys/values are ``fn(tensor)`` (new objects)."""
    new = copy.copy(cache)
    new.layers = []
    for layer in _layers(cache):
        lay = copy.copy(layer)
        if (
            getattr(layer, "is_initialized", True)
            and isinstance(layer.keys, torch.Tensor)
            and layer.keys.numel()
        ):
            lay.keys, lay.values = fn(layer.keys), fn(layer.values)
        new.layers.append(lay)
    return new


class HFVocab(Vocab):
    """The tokens of a transformers tokenizer, with surfaces as described in the module doc.

    Args:
        tokenizer: a ``PreTrainedTokenizer(Fast)``.
        size: the model's vocabulary size V (ids >= len(tokenizer) get placeholder names, no surface).
    """

    kind = "hf"

    def __init__(self, tokenizer, size: int) -> None:
        n = len(tokenizer)
        names = tokenizer.convert_ids_to_tokens(list(range(min(n, size))))
        names = [t if isinstance(t, str) else f"<|id{i}|>" for i, t in enumerate(names)]
        names += [f"<|unused{i}|>" for i in range(len(names), size)]
        seen: set[str] = set()
        for i, t in enumerate(names):  # tokenizers may map several ids to one string
            names[i] = t if t not in seen else f"{t}<|id{i}|>"
            seen.add(names[i])
        eos = (
            tokenizer.eos_token
            if tokenizer.eos_token_id is not None and tokenizer.eos_token_id < size
            else None
        )
        specials = [names[i] for i in set(tokenizer.all_special_ids) if i < size and names[i] != eos]
        super().__init__(names, separator="", eos=eos, unk=None, specials=specials)
        self.tokenizer = tokenizer
        self._surface_bytes = tuple(_token_bytes(tokenizer, names, self.special_ids, n))
        self._surfaces = tuple(_text_or_none(b) for b in self._surface_bytes)

    def surface(self, i: int) -> str | None:
        return self._surfaces[i]

    def surfaces(self) -> tuple[str | None, ...]:
        return self._surfaces

    def surface_bytes(self) -> tuple[bytes | None, ...]:
        return self._surface_bytes

    def split(self, text: str) -> list[str]:
        return self.tokenizer.convert_ids_to_tokens(self.encode(text))

    def encode(self, text: str, *, warn_unknown: bool = True) -> list[int]:
        # verbose=False: a prompt past the window is decodekit's to report (truncation= or an error)
        ids = list(self.tokenizer.encode(text, add_special_tokens=False, verbose=False))
        size = len(self)
        beyond = next((i for i in ids if i >= size), None)
        if beyond is not None:
            raise DecodekitError(
                f"the tokenizer gives token {self.tokenizer.convert_ids_to_tokens(beyond)!r} id {beyond}, "
                f"beyond the model's vocabulary of {size:,} tokens (the tokenizer has "
                f"{len(self.tokenizer):,}): the tokenizer does not belong to this model"
            )
        return ids

    def decode(self, ids) -> str:
        ids = [int(i) for i in ids if int(i) < len(self.tokenizer)]
        return self.tokenizer.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)

    def save(self, path) -> None:
        raise DecodekitError("an HFVocab is the tokenizer's: save the tokenizer with save_pretrained instead")


PREPARED = "_decodekit_prepared"  # the attribute of a tokenizer holding its prepared vocabularies
PREPARED_WIDTHS = 4  # widths kept per tokenizer


def prepared_vocab(tokenizer, size: int) -> HFVocab:
    """``HFVocab(tokenizer, size)``, made once per tokenizer and width and kept on the tokenizer
    (so it lives and dies with it): reading 50,000 tokens' bytes costs some 0.2 s of CPU, which
    a processor made per ``generate`` call should not pay each time. Made again when the
    tokenizer's length, EOS or special tokens change. Safe to share: an ``HFVocab`` is not
    changed after it is made."""
    key = (size, len(tokenizer), tokenizer.eos_token_id, tuple(tokenizer.all_special_ids))
    kept = getattr(tokenizer, "__dict__", {}).get(PREPARED)
    if kept is None:
        kept = {}
        try:
            tokenizer.__dict__[PREPARED] = kept
        except (AttributeError, TypeError):  # no instance dictionary: made each time
            return HFVocab(tokenizer, size)
    got = kept.get(key)
    if got is None:
        while len(kept) >= PREPARED_WIDTHS:
            kept.pop(next(iter(kept)))
        got = kept[key] = HFVocab(tokenizer, size)
    return got


def _byte_decoder() -> dict[str, int]:
    """GPT-2's reversible byte <-> printable character table, inverted."""
    bs = (
        list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), 256))
    )
    cs, extra = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(bs, cs)}


_BYTE_FALLBACK = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def _token_bytes(tokenizer, names: list[str], special: frozenset[int], n: int) -> list[bytes | None]:
    """Per token: the bytes it stands for, or None (special, or beyond the tokenizer)."""
    table = _byte_decoder()
    decoder = getattr(getattr(tokenizer, "backend_tokenizer", None), "decoder", None)
    if decoder is not None and type(decoder).__name__ == "ByteLevel":
        byte_level = True
    else:  # slow tokenizers, sequences of decoders: every token spelled in GPT-2's byte alphabet
        byte_level = n > 256 and all(c in table for t in names[: min(n, 1000)] if t for c in t)
    out: list[bytes | None] = []
    for i, t in enumerate(names):
        if i in special or i >= n:
            out.append(None)
        elif byte_level and all(c in table for c in t):
            out.append(bytes(table[c] for c in t))
        elif (fallback := _BYTE_FALLBACK.fullmatch(t)) is not None:  # SentencePiece byte fallback
            out.append(bytes([int(fallback.group(1), 16)]))
        else:
            s = tokenizer.decode([i], clean_up_tokenization_spaces=False)
            out.append(None if "\ufffd" in s else s.encode("utf-8", "surrogatepass"))
    return out


def _text_or_none(data: bytes | None) -> str | None:
    """The token's text, None if its bytes are not valid UTF-8 on their own."""
    try:
        return None if data is None else data.decode("utf-8")
    except UnicodeDecodeError:
        return None


class HuggingFaceLM:
    """A decoder-only transformers model through the step protocol.

    Args:
        model: an ``AutoModelForCausalLM`` (put in eval mode here); its cache must be a
            ``DynamicCache`` of layers (transformers >= 4.56).
        tokenizer: optional; needed for text in/out (``vocab``) and regex constraints.

    ``bos_id`` is the tokenizer's BOS only when the tokenizer itself prepends it to encoded text
    (GPT-2's does not: prompts are fed as given); ``eos_id`` is the tokenizer's, else the first
    of ``generation_config.eos_token_id`` (set it to None to never stop).
    """

    def __init__(self, model, tokenizer=None) -> None:
        self.model = model.eval()
        self._device: torch.device | None = None
        self.tokenizer = tokenizer
        self.vocab_size = int(model.get_output_embeddings().weight.shape[0])
        self.vocab = prepared_vocab(tokenizer, self.vocab_size) if tokenizer is not None else None
        self.bos_id = _bos_of(tokenizer)
        eos = getattr(tokenizer, "eos_token_id", None)
        if eos is None:
            gen = getattr(model, "generation_config", None) or model.config
            eos = getattr(gen, "eos_token_id", None)
            eos = eos[0] if isinstance(eos, (list, tuple)) and eos else eos
        self.eos_id = eos if eos is None or 0 <= eos < self.vocab_size else None
        params = inspect.signature(model.forward).parameters
        self._cache_arg = "cache" if "cache" in params else "past_key_values"
        # only the last position's logits are needed (transformers >= 4.45 can skip the others)
        keep = next((k for k in ("logits_to_keep", "num_logits_to_keep") if k in params), None)
        self._extra = {keep: 1} if keep else {}
        self._keep_arg = keep
        self.max_positions = _position_limit(model.config)
        self.stride: int | None = None  # windowed perplexity: None = max_positions // 2
        self.missing_tokenizer: str | None = None  # why there is none (load_hf), for the errors

    @property
    def device(self) -> torch.device:
        """The model's device, read once (iterating parameters at every step costs ~0.1 ms);
        move the model with :meth:`to`."""
        if self._device is None:
            self._device = next(self.model.parameters()).device
        return self._device

    def to(self, device: str | torch.device) -> HuggingFaceLM:
        """Move the wrapped model; returns self."""
        self.model.to(device)
        self._device = None
        return self

    def encode(self, text: str) -> list[int]:
        """Text -> ids with the tokenizer (no special tokens added)."""
        return self._need_vocab().encode(text)

    def decode(self, ids) -> str:
        return self._need_vocab().decode(ids)

    def _need_vocab(self) -> HFVocab:
        if self.vocab is None:
            default = "this HuggingFaceLM has no tokenizer: pass tokenizer= to work with text"
            raise DecodekitError(self.missing_tokenizer or default)
        return self.vocab

    def initial_state(self, batch_size: int) -> HFState:
        empty = getattr(self.model, "empty_cache", None)  # decodekit's own GPT-2 (models/gpt2.py)
        if empty is None:
            from transformers import DynamicCache

            empty = DynamicCache
        zeros = torch.zeros(batch_size, 0, dtype=torch.long, device=self.device)
        return HFState(empty(), zeros, torch.zeros(batch_size, dtype=torch.long, device=self.device))

    def _forward(self, state: HFState, tokens: torch.Tensor, extra: dict) -> tuple[Any, HFState]:
        n, T = tokens.shape
        dev = self.device
        length = state.mask.shape[1] + T  # the cache length: the largest position + 1 of any row
        if self.max_positions is not None and length > self.max_positions:
            raise DecodekitError(
                f"{length:,} tokens in one sequence (context + new); the model's limit is "
                f"{self.max_positions:,} positions"
            )
        mask = torch.cat([state.mask, torch.ones(n, T, dtype=torch.long, device=dev)], 1)
        pos = state.position.view(-1, 1) + torch.arange(T, device=dev)  # [N, T]
        cache = _map_cache(state.cache, lambda t: t)
        out = self.model(
            input_ids=tokens.to(dev), attention_mask=mask, position_ids=pos, use_cache=True,
            **{self._cache_arg: cache}, **extra,
        )  # fmt: skip
        new_cache = getattr(out, "cache", None)
        new_cache = out.past_key_values if new_cache is None else new_cache
        return out, HFState(new_cache, mask, state.position + T)

    @torch.no_grad()
    def prefill(self, state: HFState, tokens: torch.Tensor) -> tuple[torch.Tensor, HFState]:
        """Encode tokens [N, T] in one forward call. Returns (logprobs [N, V] after the last, state)."""
        out, state = self._forward(state, tokens, self._extra)
        return torch.log_softmax(out.logits[:, -1].float(), -1), state  # [N, V]

    @torch.no_grad()
    def target_logprobs(
        self, state: HFState, inputs: torch.Tensor, targets: torch.Tensor
    ) -> tuple[torch.Tensor, HFState]:
        """Score a chunk in one forward call (perplexity): inputs, targets [N, T] -> (float32
        log p(target_t | inputs_<=t) [N, T], state)."""
        out, state = self._forward(state, inputs, {})
        logprobs = torch.log_softmax(out.logits.float(), -1)  # [N, T, V]
        return logprobs.gather(2, targets.to(logprobs.device).unsqueeze(2)).squeeze(2), state

    @torch.no_grad()
    def step_many(
        self, state: HFState, tokens: torch.Tensor, keep_last: int | None = None
    ) -> tuple[torch.Tensor, HFState]:
        """One forward call over L tokens with the cache. Args: tokens [N, L]. Returns (logprobs
        [N, L, V] after each token, or the last ``keep_last`` of them, state after all): the
        model's own ``logits_to_keep`` where it has one (its 0 means all: 1 is asked, then cut)."""
        extra = {} if keep_last is None or self._keep_arg is None else {self._keep_arg: max(1, keep_last)}
        out, state = self._forward(state, tokens, extra)
        logits = out.logits if keep_last is None else out.logits[:, out.logits.shape[1] - keep_last :]
        return torch.log_softmax(logits.float(), -1), state

    def step(self, state: HFState, tokens: torch.Tensor) -> tuple[torch.Tensor, HFState]:
        """Args: tokens [N]. Returns (logprobs [N, V], state)."""
        return self.prefill(state, tokens.view(-1, 1))

    def reorder_state(self, state: HFState, rows: torch.Tensor) -> HFState:
        """Rows ``rows`` [N'] of every cache tensor, mask and position (new tensors)."""
        rows = rows.to(self.device)
        cache = _map_cache(state.cache, lambda t: t.index_select(0, rows))
        return HFState(cache, state.mask.index_select(0, rows), state.position.index_select(0, rows))

    def concat_states(self, states: list[HFState]) -> HFState:
        """Join row groups; shorter caches are left-padded with zeros and masked out."""
        length = max(s.mask.shape[1] for s in states)

        def pad(t: torch.Tensor, axis: int) -> torch.Tensor:
            missing = length - t.shape[axis]
            if missing == 0:
                return t
            shape = list(t.shape)
            shape[axis] = missing
            return torch.cat([t.new_zeros(shape), t], axis)

        caches = [_layers(s.cache) for s in states]
        joined = _map_cache(states[0].cache, lambda t: t)
        for j, layer in enumerate(joined.layers):
            if all(isinstance(c[j].keys, torch.Tensor) and c[j].keys.numel() for c in caches):
                layer.keys = torch.cat([pad(c[j].keys, 2) for c in caches], 0)
                layer.values = torch.cat([pad(c[j].values, 2) for c in caches], 0)
        mask = torch.cat([pad(s.mask, 1) for s in states], 0)
        return HFState(joined, mask, torch.cat([s.position for s in states], 0))


def _position_limit(config) -> int | None:
    """The number of positions the model's config allows (GPT-2's ``n_positions``, most others'
    ``max_position_embeddings``), None if it names none."""
    for name in ("n_positions", "max_position_embeddings", "n_ctx"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def _bos_of(tokenizer) -> int | None:
    """The BOS id if encoding text with special tokens prepends it, else None."""
    if tokenizer is None or tokenizer.bos_token_id is None:
        return None
    ids = tokenizer("a")["input_ids"]
    return tokenizer.bos_token_id if ids and ids[0] == tokenizer.bos_token_id else None


PICKLED = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle")
TOKENIZER_FILES = ("tokenizer.json", "vocab.json", "tokenizer.model", "vocab.txt", "spiece.model")
# the JSON files through which transformers may be told to import a module of the directory
CODE_NAMING_FILES = (
    "config.json", "tokenizer_config.json", "generation_config.json", "preprocessor_config.json",
    "processor_config.json",
)  # fmt: skip
MAX_JSON_BYTES = 16 * MiB  # a config or an index; the largest real ones are a few hundred KiB
NEVER_RUNS_CODE = "decodekit never runs code from a model directory (trust_remote_code is always False)"


def _check_local_dir(path: Path) -> None:
    """A local model directory holds regular files only (links followed), and safetensors weights:
    pickled weights (``pytorch_model.bin``) are refused, since loading them would unpickle."""
    files = sorted(p for p in path.iterdir() if not p.is_dir())
    for f in files:
        try:
            check_regular(f, f.name)
        except FileNotFoundError:
            raise DecodekitError(
                f"{f}: a broken link (its target is missing); refusing to load {path}"
            ) from None
    if not any(f.suffix == ".safetensors" for f in files):
        pickled = [f.name for f in files if f.suffix in PICKLED]
        if pickled:
            raise DecodekitError(
                f"{path} holds only pickled weights ({', '.join(pickled[:3])}); decodekit never unpickles "
                "files: convert them to safetensors (save_pretrained(..., safe_serialization=True) in a "
                "trusted environment) and load that directory"
            )


def _read_json(path: Path, what: str) -> Any:
    """A JSON file of a model directory, read bounded; one-line DecodekitError if it is not JSON."""
    try:
        return json.loads(read_bytes(path, what, max_bytes=MAX_JSON_BYTES))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise DecodekitError(f"{path}: {what} is not valid JSON ({str(e)[:100]})") from None


def _holds_key(data: Any, key: str) -> bool:
    """Whether ``key`` is a key of any object nested in ``data`` (iterative: any depth)."""
    todo = [data]
    while todo:
        item = todo.pop()
        if isinstance(item, dict):
            if key in item:
                return True
            todo.extend(item.values())
        elif isinstance(item, list):
            todo.extend(item)
    return False


def _refuse_code(path: Path, known_types) -> None:
    """Refuse, before transformers reads the directory, one that names code of its own: an
    ``auto_map`` anywhere in :data:`CODE_NAMING_FILES`, or a ``model_type`` transformers does not
    ship (``known_types``: transformers' ``CONFIG_MAPPING``), which only such code could build."""
    model_type = None
    for name in CODE_NAMING_FILES:
        if not (path / name).is_file():
            continue
        data = _read_json(path / name, name)
        if name == "config.json" and isinstance(data, dict):
            model_type = data.get("model_type")
        if _holds_key(data, "auto_map"):
            names = data.get("auto_map") if isinstance(data, dict) else None
            shown = f": {', '.join(sorted(map(str, names)))[:120]}" if isinstance(names, dict) else ""
            hint = (
                f" (transformers ships model_type {model_type!r} itself: delete auto_map from {name} "
                "to load it with transformers' own classes)"
                if isinstance(model_type, str) and model_type in known_types
                else ""
            )
            raise DecodekitError(
                f"{path}: {name} names code of its own (auto_map{shown}); {NEVER_RUNS_CODE}{hint}"
            )
        if (
            name == "config.json"
            and isinstance(data, dict)
            and "model_type" in data
            and (not isinstance(model_type, str) or model_type not in known_types)
        ):
            import transformers

            raise DecodekitError(
                f"{path}: model_type {str(model_type)[:60]!r} is not one transformers "
                f"{transformers.__version__} ships (a newer transformers may know it); {NEVER_RUNS_CODE}"
            )


def _inside(real: str, roots: list[str]) -> bool:
    return any(real == root or real.startswith(root.rstrip(os.sep) + os.sep) for root in roots)


def _check_shards(path: Path) -> None:
    """Every shard a ``*.safetensors.index*.json`` names is a regular file inside ``path``, checked
    before anything reads it: no absolute name, no ``..``, no link leading out (a snapshot of the
    Hugging Face cache may link into its repository's ``blobs/``), no FIFO or device."""
    roots = [os.path.realpath(path)]
    if path.parent.name == "snapshots" and (path.parent.parent / "blobs").is_dir():
        roots.append(os.path.realpath(path.parent.parent / "blobs"))
    for index in sorted(path.glob("*.safetensors.index*.json")):
        data = _read_json(index, "the shard index")
        weight_map = data.get("weight_map") if isinstance(data, dict) else None
        if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
            raise DecodekitError(f"{index}: not a shard index (no weight_map of tensor names to file names)")
        for shard in sorted(set(weight_map.values())):
            named = f"{index} names shard {shard!r}"
            plain = shard.replace("\\", "/")  # a Windows spelling counts as what it means there
            if (
                not shard
                or "\0" in shard
                or plain.startswith("/")
                or ":" in shard
                or ".." in plain.split("/")
            ):
                raise DecodekitError(f"{named}, outside the model directory; refusing to read it")
            full = path / shard
            real = os.path.realpath(full)
            if not _inside(real, roots):
                raise DecodekitError(
                    f"{named}, a link to {real}, outside the model directory; refusing to read it"
                )
            try:
                check_regular(full, f"shard {shard!r} named by {index.name}")
            except FileNotFoundError:
                raise DecodekitError(f"{named}, which is missing") from None


def _check_finite(model, path: Path) -> None:
    """DecodekitError naming the first parameter (in name order) holding NaN or infinity, as
    :func:`decodekit.checkpoint.check_finite` does for decodekit checkpoints. A sum is finite only
    if every term is, so each piece of 4M values is summed (about 0.2 CPU s per billion values),
    and counted only when its sum is not finite (fp16 summed in float32, so as not to overflow)."""
    source = getattr(model, "source_names", {})  # decodekit's GPT-2: the names in the files
    for name, p in sorted(
        ((source.get(n, n), p) for n, p in model.named_parameters()), key=lambda item: item[0]
    ):
        if not p.is_floating_point():
            continue
        pieces = p.detach().reshape(-1).split(1 << 22)
        wide = torch.float32 if p.dtype == torch.float16 else None  # an fp16 sum overflows at 65,504
        if all(bool(torch.isfinite(piece.sum(dtype=wide))) for piece in pieces):
            continue
        nan = sum(int(torch.isnan(piece).sum()) for piece in pieces)
        inf = sum(int(torch.isinf(piece).sum()) for piece in pieces)
        if nan or inf:
            counts = " and ".join(
                c for c in (f"{nan} NaN" if nan else "", f"{inf} infinite" if inf else "") if c
            )
            raise DecodekitError(
                f"{path}: tensor {name!r} has {counts} values; the weights are damaged (save or download "
                "the model again)"
            )


@contextlib.contextmanager
def _no_stdin():
    """``sys.stdin`` an empty stream while transformers loads: whatever it would ask with
    ``input()`` meets end of file, and the user's stdin (prompts, a pipe) is never consumed."""
    saved = sys.stdin
    sys.stdin = io.StringIO()
    try:
        yield
    finally:
        sys.stdin = saved


def _resolve(path_or_name: str | Path) -> Path:
    """A directory as given, else a hub name's snapshot in the local Hugging Face cache."""
    from decodekit.models.hub_cache import cached_snapshot, is_hub_name, not_cached

    path = Path(path_or_name)
    if path.exists() or not is_hub_name(str(path_or_name)):
        return path
    snapshot = cached_snapshot(str(path_or_name))
    if snapshot is None:
        raise DecodekitError(
            f"cannot load a transformers causal LM: no such directory, and {not_cached(str(path_or_name))}"
        )
    return snapshot


def load_hf(path_or_name: str | Path, device: str | torch.device | None = None) -> HuggingFaceLM:
    """Load a causal LM and its tokenizer from a local directory (written by ``save_pretrained``)
    or a hub name (``gpt2``, ``org/name``) found in the local Hugging Face cache
    (:mod:`decodekit.models.hub_cache`), never a download, from safetensors weights only
    (nothing is unpickled). Loading never runs code from a model directory and never reads stdin.

    Checked before transformers reads anything: every file a regular file; no ``auto_map`` (the
    directory's own code) in its configs and a ``model_type`` transformers ships; every shard an
    index names a regular file inside the directory. Checked after: every weight finite.

    Raises:
        DecodekitError: transformers is not installed, ``path_or_name`` is neither a directory nor
            a cached hub name, or the directory fails a check above or does not load.
    """
    path = _resolve(path_or_name)
    where = f"cannot load a transformers causal LM from {str(path)!r} (local files only, no downloads)"
    if not path.is_dir():
        raise DecodekitError(f"{where}: {'not a directory' if path.exists() else 'no such directory'}")
    try:
        import transformers
        from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    except ImportError as e:
        raise DecodekitError(
            f"{path} is a transformers model; loading it needs transformers: pip install 'decodekit[hf]'"
        ) from e
    _check_local_dir(path)
    _refuse_code(path, transformers.CONFIG_MAPPING)
    _check_shards(path)
    from transformers.utils import logging as hf_logging

    safe = {"local_files_only": True, "trust_remote_code": False}
    quiet = hf_logging.is_progress_bar_enabled() and not (sys.stderr and sys.stderr.isatty())
    if quiet:  # bars only on a terminal
        hf_logging.disable_progress_bar()
    try:
        with _no_stdin():
            model = native_model(path) if NATIVE_GPT2 else None  # GPT-2 without transformers' modeling
            if model is None:
                config = AutoConfig.from_pretrained(str(path), **safe)
                model = AutoModelForCausalLM.from_pretrained(
                    str(path), config=config, use_safetensors=True, **safe
                )
    except Exception as e:  # transformers raises many types; the user needs one line, not 48
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
        raise DecodekitError(
            f"{where}: {first} (expected a directory written by save_pretrained with safetensors weights)"
        ) from None
    finally:
        if quiet:
            hf_logging.enable_progress_bar()
    _check_finite(model, path)
    tokenizer, missing = None, None
    if any((path / name).is_file() for name in TOKENIZER_FILES):
        try:
            with _no_stdin():
                tokenizer = AutoTokenizer.from_pretrained(str(path), **safe)
        except (OSError, ValueError, TypeError) as e:
            missing = f"{path}: its tokenizer files could not be loaded ({str(e).strip()[:200]})"
    else:  # AutoTokenizer would build an empty tokenizer from config.json alone
        missing = (
            f"{path} holds no tokenizer ({', '.join(TOKENIZER_FILES[:-1])} or {TOKENIZER_FILES[-1]}): "
            "save the tokenizer there with tokenizer.save_pretrained"
        )
    if device is not None:
        model = model.to(device)
    lm = HuggingFaceLM(model, tokenizer)
    lm.missing_tokenizer = missing
    return lm
