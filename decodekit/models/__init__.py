"""Language models behind the step protocol: the bundled networks and their registry, n-gram
models (Kneser-Ney training, ARPA files), mixtures, the transformers adapter, and stream scoring.

Every name is imported on first use (PEP 562), so ``import decodekit.models`` imports neither torch
nor transformers; ``HuggingFaceLM`` and ``load_hf`` need the optional ``decodekit[hf]`` extra.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from decodekit.util.lazy import lazy_exports

# public name -> module that defines it
_LAZY: dict[str, str] = {
    "ArpaError": "decodekit.models.arpa",
    "Controlled": "decodekit.models.controls",
    "read_arpa": "decodekit.models.arpa",
    "write_arpa": "decodekit.models.arpa",
    "LanguageModel": "decodekit.models.base",
    "State": "decodekit.models.base",
    "model_device": "decodekit.models.base",
    "HuggingFaceLM": "decodekit.models.hf",
    "load_hf": "decodekit.models.hf",
    "kn_discounts": "decodekit.models.kneser_ney",
    "train_kneser_ney": "decodekit.models.kneser_ney",
    "train_kneser_ney_on_sentences": "decodekit.models.kneser_ney",
    "MixtureLM": "decodekit.models.mixture",
    "fit_weights": "decodekit.models.mixture",
    "NeuralLM": "decodekit.models.neural",
    "NgramLM": "decodekit.models.ngram",
    "CONFIGS": "decodekit.models.configs",
    "MODELS": "decodekit.models.registry",
    "config_from_dict": "decodekit.models.registry",
    "config_to_dict": "decodekit.models.registry",
    "create_model": "decodekit.models.registry",
    "make_config": "decodekit.models.registry",
    "register": "decodekit.models.registry",
    "stream_logprobs": "decodekit.models.scoring",
    "Suppressed": "decodekit.models.suppress",
    "concat": "decodekit.models.state",
    "select": "decodekit.models.state",
}

__all__ = [
    "ArpaError",
    "Controlled",
    "HuggingFaceLM",
    "LanguageModel",
    "CONFIGS",
    "MODELS",
    "MixtureLM",
    "NeuralLM",
    "NgramLM",
    "State",
    "Suppressed",
    "concat",
    "config_from_dict",
    "config_to_dict",
    "create_model",
    "fit_weights",
    "kn_discounts",
    "load_hf",
    "make_config",
    "model_device",
    "read_arpa",
    "register",
    "select",
    "stream_logprobs",
    "train_kneser_ney",
    "train_kneser_ney_on_sentences",
    "write_arpa",
]


__getattr__, __dir__ = lazy_exports(globals(), _LAZY)


if TYPE_CHECKING:
    from decodekit.models.arpa import ArpaError, read_arpa, write_arpa
    from decodekit.models.base import LanguageModel, State, model_device
    from decodekit.models.configs import CONFIGS
    from decodekit.models.controls import Controlled
    from decodekit.models.hf import HuggingFaceLM, load_hf
    from decodekit.models.kneser_ney import kn_discounts, train_kneser_ney, train_kneser_ney_on_sentences
    from decodekit.models.mixture import MixtureLM, fit_weights
    from decodekit.models.neural import NeuralLM
    from decodekit.models.ngram import NgramLM
    from decodekit.models.registry import (
        MODELS,
        config_from_dict,
        config_to_dict,
        create_model,
        make_config,
        register,
    )
    from decodekit.models.scoring import stream_logprobs
    from decodekit.models.state import concat, select
    from decodekit.models.suppress import Suppressed
