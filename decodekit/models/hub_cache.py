"""Hub names (``gpt2``, ``org/name``) resolved from the local Hugging Face cache, offline.

``huggingface_hub`` keeps a downloaded repository as ``CACHE/models--ORG--NAME/`` with the files in
``blobs/``, one directory of links into them per revision under ``snapshots/<commit>/``, and
``refs/main`` naming the commit of the main branch. :func:`cached_snapshot` finds that snapshot
directory by looking at the files alone (no network, no ``huggingface_hub`` call, nothing
downloaded), so that :func:`decodekit.models.hf.load_hf` loads it with the checks of any model
directory. The cache is ``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else
``$XDG_CACHE_HOME/huggingface/hub`` (default ``~/.cache/huggingface/hub``), read when called, as
``huggingface_hub`` reads them at import.

Imports neither torch nor transformers.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from decodekit.errors import DecodekitError
from decodekit.util.files import read_bytes

__all__ = ["cached_snapshot", "hub_cache_dir", "is_hub_name", "not_cached"]

# a repository id as the hub spells it: NAME or ORG/NAME, no "--" or ".." (huggingface_hub's rules)
_HUB_NAME = re.compile(r"[A-Za-z0-9][\w.-]{0,95}(?:/[A-Za-z0-9][\w.-]{0,95})?", re.ASCII)
_REVISION = re.compile(r"[\w.-]{1,255}", re.ASCII)


def hub_cache_dir() -> Path:
    """The Hugging Face hub cache directory the environment names (it may not exist)."""
    env = os.environ
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if env.get(name):
            return Path(env[name]).expanduser()
    if env.get("HF_HOME"):
        return Path(env["HF_HOME"]).expanduser() / "hub"
    return Path(env.get("XDG_CACHE_HOME") or "~/.cache").expanduser() / "huggingface" / "hub"


def is_hub_name(spec: str) -> bool:
    """Whether ``spec`` is spelled as a hub repository id (``gpt2``, ``org/name``)."""
    return bool(_HUB_NAME.fullmatch(spec)) and "--" not in spec and ".." not in spec


def cached_snapshot(name: str) -> Path | None:
    """The snapshot directory of hub model ``name`` in the local cache: the one ``refs/main``
    names, else the only one there is; None when the cache holds no snapshot of it.

    Raises:
        DecodekitError: ``refs/main`` names no snapshot, or several snapshots and no ``refs/main``.
    """
    if not is_hub_name(name):
        return None
    repo = hub_cache_dir() / ("models--" + name.replace("/", "--"))
    snapshots = repo / "snapshots"
    if not snapshots.is_dir():
        return None
    ref = repo / "refs" / "main"
    if ref.is_file():
        rev = read_bytes(ref, "refs/main", max_bytes=4096).decode("utf-8", "replace").strip()
        if not _REVISION.fullmatch(rev) or rev in (".", "..") or not (snapshots / rev).is_dir():
            raise DecodekitError(
                f"{ref}: refs/main names no snapshot of {name} ({rev[:60]!r}); pass a snapshot "
                f"directory under {snapshots} as the model instead"
            )
        return snapshots / rev
    found = sorted(p for p in snapshots.iterdir() if p.is_dir())
    if len(found) > 1:
        raise DecodekitError(
            f"{repo} holds {len(found)} snapshots of {name} and no refs/main to choose one: pass one of "
            f"them as the model directory ({found[0]}, ...)"
        )
    return found[0] if found else None


def not_cached(name: str) -> str:
    """One line: ``name`` is not in the cache, and how to fetch and save it once (decodekit never
    downloads)."""
    local = f"{name.rsplit('/', 1)[-1]}-local"
    recipe = (
        'python -c "from transformers import AutoModelForCausalLM, AutoTokenizer; '
        f"AutoModelForCausalLM.from_pretrained('{name}').save_pretrained('{local}'); "
        f"AutoTokenizer.from_pretrained('{name}').save_pretrained('{local}')\""
    )
    return (
        f"{name} is not in the Hugging Face cache ({hub_cache_dir()}) and decodekit never downloads: "
        f"fetch and save it once with {recipe}, then pass --model {local}"
    )
