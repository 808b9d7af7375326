"""decodekit.training.allocator: malloc reuse is applied once, and never against the user's wishes."""

import subprocess
import sys

import pytest

SNIPPET = "from decodekit.training.allocator import reuse_freed_memory as r; print(r(), r())"


def _run(env_extra: dict[str, str]) -> str:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "LD_PRELOAD"}
    out = subprocess.run(
        [sys.executable, "-c", SNIPPET], env={**env, **env_extra}, capture_output=True, text=True, check=True
    )
    return out.stdout.strip()


@pytest.mark.parametrize(
    "env",
    [{"DECODEKIT_MALLOC": "system"}, {"MALLOC_TRIM_THRESHOLD_": "1000"}, {"MALLOC_MMAP_THRESHOLD_": "1"}],
)
def test_left_alone_when_the_user_chose(env):
    assert _run(env) == "False False"


def test_applied_once_on_glibc():
    import platform

    expected = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"
    assert _run({}) == f"{expected} {expected}"
