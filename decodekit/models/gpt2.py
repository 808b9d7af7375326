"""GPT-2's forward pass written here: :class:`NativeGPT2`, what :func:`~decodekit.models.hf.load_hf`
runs for a plain GPT-2 directory instead of transformers' modeling code.

Why: importing transformers' GPT-2 model class takes the process from 245 MB (torch, tokenizers
and transformers' tokenizer classes) to 444 MB of peak memory and about a CPU second, more than
the README's constrained command needs in all. The module answers the calls
:class:`~decodekit.models.hf.HuggingFaceLM` makes of a transformers model (``forward`` with
``input_ids``, ``attention_mask``, ``position_ids``, ``past_key_values``, ``use_cache``,
``logits_to_keep``; a cache of ``layers`` with ``keys`` / ``values`` [N, heads, L, d]), so
everything above it is unchanged; its logits equal transformers' to float rounding
(tests/models/test_gpt2_native.py).

The block, per layer (Radford et al. 2019; transformers' ``GPT2Block``)::

    h = h + W_o · attention(LN_1(h))      causal, scaled by 1 / sqrt(d), left padding masked
    h = h + W_2 · gelu_tanh(W_1 · LN_2(h))
    logits = LN_f(h) · E^T                E: the token embeddings (tied)

Only what that covers is taken (:func:`native_model` returns None otherwise, and transformers
loads the directory): ``model_type`` gpt2, safetensors weights (one file or shards), tied embeddings, the
tanh GELU, attention scaled as above, no cross-attention. Weights are read with safetensors
(never unpickled).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import torch
from torch import nn

__all__ = ["NativeGPT2", "native_model"]

GELU_TANH = ("gelu_new", "gelu_pytorch_tanh", "gelu_fast")


@dataclass
class _Layer:
    """One layer's cached keys and values [N, heads, L, d] (None before the first token)."""

    keys: torch.Tensor | None = None
    values: torch.Tensor | None = None


class GPT2Cache:
    """The key/value cache: ``layers``, one :class:`_Layer` per block, as transformers' cache."""

    def __init__(self, n_layer: int) -> None:
        self.layers = [_Layer() for _ in range(n_layer)]


@dataclass
class _Output:
    logits: torch.Tensor  # [N, T', V]
    past_key_values: GPT2Cache


class _Block(nn.Module):
    def __init__(self, width: int, heads: int, eps: float) -> None:
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(width, eps=eps)
        self.c_attn = nn.Linear(width, 3 * width)
        self.c_proj = nn.Linear(width, width)
        self.ln_2 = nn.LayerNorm(width, eps=eps)
        self.c_fc = nn.Linear(width, 4 * width)
        self.mlp_proj = nn.Linear(4 * width, width)

    def forward(self, h: torch.Tensor, layer: _Layer, allowed: torch.Tensor) -> torch.Tensor:
        """h [N, T, C]; ``layer`` extended with this call's keys and values; allowed [N, 1, T, L]."""
        n, t, c = h.shape
        q, k, v = self.c_attn(self.ln_1(h)).split(c, dim=2)
        q, k, v = (x.view(n, t, self.heads, c // self.heads).transpose(1, 2) for x in (q, k, v))
        if layer.keys is not None:
            k, v = torch.cat([layer.keys, k], 2), torch.cat([layer.values, v], 2)
        layer.keys, layer.values = k, v
        a = nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
        h = h + self.c_proj(a.transpose(1, 2).reshape(n, t, c))
        return h + self.mlp_proj(nn.functional.gelu(self.c_fc(self.ln_2(h)), approximate="tanh"))


class NativeGPT2(nn.Module):
    """GPT-2 (module docstring). ``config``: the directory's config.json as a namespace."""

    def __init__(self, config: SimpleNamespace) -> None:
        super().__init__()
        self.config = config
        self.generation_config = None
        width = config.n_embd
        self.wte = nn.Embedding(config.vocab_size, width)
        self.wpe = nn.Embedding(config.n_positions, width)
        self.h = nn.ModuleList(
            _Block(width, config.n_head, config.layer_norm_epsilon) for _ in range(config.n_layer)
        )
        self.ln_f = nn.LayerNorm(width, eps=config.layer_norm_epsilon)

    def get_output_embeddings(self) -> nn.Embedding:
        return self.wte

    def empty_cache(self) -> GPT2Cache:
        return GPT2Cache(len(self.h))

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        past_key_values: GPT2Cache | None = None,
        use_cache: bool = True,
        logits_to_keep: int = 0,
    ) -> _Output:
        """input_ids [N, T]; attention_mask [N, L] over the cache and these tokens (0: padding);
        position_ids [N, T]. Returns the logits of the last ``logits_to_keep`` positions (0: all)
        and the cache extended in place."""
        n, t = input_ids.shape
        cache = past_key_values if past_key_values is not None else self.empty_cache()
        past = 0 if cache.layers[0].keys is None else cache.layers[0].keys.shape[2]
        length = past + t
        if position_ids is None:
            position_ids = torch.arange(past, length, device=input_ids.device).expand(n, t)
        if attention_mask is None:
            attention_mask = torch.ones(n, length, dtype=torch.long, device=input_ids.device)
        # query i (cache position past + i) sees keys up to itself that are not padding, and
        # always itself (a padding query would otherwise see nothing and make NaN)
        key_at = torch.arange(length, device=input_ids.device)
        query_at = key_at[past:, None]
        allowed = (key_at[None, :] <= query_at)[None, None] & attention_mask.bool()[:, None, None, :]
        allowed = allowed | (key_at[None, :] == query_at)[None, None]
        h = self.wte(input_ids) + self.wpe(position_ids.clamp(min=0))
        for block, layer in zip(self.h, cache.layers):
            h = block(h, layer, allowed)
        if logits_to_keep:
            h = h[:, -logits_to_keep:]
        return _Output(self.ln_f(h) @ self.wte.weight.T, cache)


def _supported(config: dict) -> bool:
    return (
        config.get("model_type") == "gpt2"
        and config.get("activation_function", "gelu_new") in GELU_TANH
        and config.get("tie_word_embeddings", True)
        and config.get("scale_attn_weights", True)
        and not config.get("scale_attn_by_inverse_layer_idx", False)
        and not config.get("reorder_and_upcast_attn", False)
        and not config.get("add_cross_attention", False)
        and config.get("n_inner") in (None, 4 * config.get("n_embd", 768))
        and all(
            isinstance(config.get(k), int)
            for k in ("vocab_size", "n_positions", "n_embd", "n_head", "n_layer")
        )
    )


def _weight_files(path: Path) -> list[Path] | None:
    """``model.safetensors``, else the shards ``model.safetensors.index.json`` names (the caller
    checked each is a regular file inside the directory); None if neither."""
    if (path / "model.safetensors").is_file():
        return [path / "model.safetensors"]
    index = path / "model.safetensors.index.json"
    if not index.is_file():
        return None
    try:
        weight_map = json.loads(index.read_text(encoding="utf-8")).get("weight_map")
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        return None
    return [path / name for name in sorted(set(weight_map.values()))]


def native_model(path: Path) -> NativeGPT2 | None:
    """The GPT-2 of directory ``path`` (its config.json and safetensors weights, one file or
    shards), or None where the directory is anything else (transformers loads it then). The
    caller has checked the files. ``source_names`` maps each parameter to its name in the files."""
    config_file, files = path / "config.json", _weight_files(path)
    if not config_file.is_file() or not files:
        return None
    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(config, dict) or not _supported(config):
        return None
    from safetensors.torch import load_file

    tensors = {k: v for f in files for k, v in load_file(str(f)).items()}
    names = {k.removeprefix("transformer."): v for k, v in tensors.items()}
    file_name = {k.removeprefix("transformer."): k for k in tensors}
    expected = {"wte.weight", "wpe.weight", "ln_f.weight", "ln_f.bias"}
    if not expected <= names.keys():
        return None
    defaults = {"layer_norm_epsilon": 1e-5}
    model = NativeGPT2(SimpleNamespace(**{**defaults, **config}))
    dtype = names["wte.weight"].dtype
    state = {"wte.weight": names["wte.weight"], "wpe.weight": names["wpe.weight"]}
    state |= {f"ln_f.{p}": names[f"ln_f.{p}"] for p in ("weight", "bias")}
    source = {k: file_name[k] for k in state}
    ours = {"ln_1": "ln_1", "attn.c_attn": "c_attn", "attn.c_proj": "c_proj", "ln_2": "ln_2"}
    ours |= {"mlp.c_fc": "c_fc", "mlp.c_proj": "mlp_proj"}
    for i in range(config["n_layer"]):
        for theirs, mine in ours.items():
            for p in ("weight", "bias"):
                got = names.get(f"h.{i}.{theirs}.{p}")
                if got is None:
                    return None
                # transformers' Conv1D keeps weights [in, out]; nn.Linear [out, in]
                state[f"h.{i}.{mine}.{p}"] = got.T if p == "weight" and not mine.startswith("ln") else got
                source[f"h.{i}.{mine}.{p}"] = file_name[f"h.{i}.{theirs}.{p}"]
    lm_head = names.get("lm_head.weight")
    if lm_head is not None and not torch.equal(lm_head, names["wte.weight"]):
        return None  # untied after all
    model.to(dtype)
    try:
        model.load_state_dict({k: v.contiguous() for k, v in state.items()}, strict=True)
    except RuntimeError:  # a shape the config does not say
        return None
    model.source_names = source
    return model.eval()
