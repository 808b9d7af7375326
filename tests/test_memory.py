"""The memory estimate of a search (issue 16): refusal with what would fit, batches split to fit,
prompts encoded in bounded memory."""

from __future__ import annotations

import json

import pytest
import torch

import decodekit.decoding.memory as memory
from decodekit.decoding.generation import GenerationConfig, generate
from decodekit.decoding.memory import ResourceError, estimate, parse_size
from decodekit.jobs import generate_jsonl
from decodekit.models.lstm import LSTMLM, LSTMConfig
from decodekit.vocab import WordVocab

WORDS = ["the", "company", "said", "profit", "rose", "market", "fell", "shares"]


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return LSTMLM(LSTMConfig(embed=16, hidden=16, layers=1), WordVocab(["<unk>", "<eos>", *WORDS])).eval()


@pytest.mark.parametrize(
    "prompts,changes,limit,advice",
    [
        (1, {"strategy": "beam", "beam_size": 100_000}, "50M", "at most beam_size="),
        (1, {"strategy": "sample", "num_samples": 100_000}, "50M", "at most num_samples="),
        (1, {"constraint": r".*\bprofit\b.*", "beam_size": 10_000}, "20M", "at most beam_size="),
        (64, {"strategy": "beam", "beam_size": 2000}, "50M", "prompts at a time fit"),
        (1, {"strategy": "beam", "max_length": 1_000_000}, "200M", "at most max_length="),
    ],
)
def test_refused_with_what_would_fit(model, prompts, changes, limit, advice):
    config = GenerationConfig(**changes)
    with pytest.raises(ResourceError) as e:
        generate(model, [[2, 3]] * prompts, config, max_memory=limit)
    message = str(e.value)
    assert advice in message and "\n" not in message
    assert f"more than the {memory.human(parse_size(limit))} it may use (the given limit)" in message
    first = message.split("; ")[1]
    value = int(first.split("=")[1].split()[0].replace(",", "")) if "=" in first else None
    if value is not None:  # the setting named first fits, one more does not
        key = first.split("at most ")[1].split("=")[0]
        fits = config.replace(**{key: value})
        assert estimate(model, [2] * prompts, fits).host <= parse_size(limit)  # on the CPU: everything
        assert estimate(model, [2] * prompts, config.replace(**{key: value + 1})).host > parse_size(limit)


def test_long_prompt_is_encoded_in_chunks(model, monkeypatch):
    prompt = [2 + i % 8 for i in range(3000)]
    whole = generate(model, [prompt], GenerationConfig(max_length=4))
    monkeypatch.setattr(type(model), "prefill_chunk", 700)
    assert generate(model, [prompt], GenerationConfig(max_length=4)) == whole
    big = estimate(model, [1_000_000], GenerationConfig())
    assert big.host < 100 * 2**20  # a million-token prompt: tens of MB, not gigabytes
    with pytest.raises(ResourceError, match="prompts of at most [0-9,]+ tokens fit"):
        generate(model, [[2] * 1_000_000], GenerationConfig(), max_memory="10M")


def test_batches_are_split_to_fit(model, tmp_path, monkeypatch):
    config = GenerationConfig(strategy="beam", beam_size=2000, max_length=3)
    one = estimate(model, [2], config).host
    calls = []
    real = memory.check

    def counting(model_, prompts, config_, **kw):
        calls.append(len(prompts))
        return real(model_, prompts, config_, **kw)

    monkeypatch.setattr("decodekit.decoding.plan.memory.check", counting)
    lines = [json.dumps({"id": i, "prompt": [2 + i % 8]}) for i in range(64)]
    counts = generate_jsonl(model, lines, tmp_path / "o", config, batch_size=64, max_memory=int(10.5 * one))
    assert counts["written"] == 64 and counts["errors"] == 0
    assert calls == [10] * 6 + [4]  # 64 prompts decoded 10 at a time
    alone = generate(model, [[2 + 5 % 8]], config)[0]
    got = {json.loads(x)["id"]: json.loads(x) for x in (tmp_path / "o").read_text().splitlines()}
    assert [h["tokens"] for h in got[5]["hypotheses"]] == [list(h.tokens) for h in alone]


def test_cli_refuses_in_one_line(tmp_path, capfd, monkeypatch):
    from decodekit.cli import main

    monkeypatch.setenv("DECODEKIT_MAX_MEMORY", "2G")
    with pytest.raises(SystemExit) as e:
        main(["generate", "the company", "--strategy", "beam", "--beam-size", "100000"])  # the PTB model
    err = capfd.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(err) == 1
    assert err[0].startswith("Error: this beam search needs about ") and "(DECODEKIT_MAX_MEMORY)" in err[0]
    assert "100,000 rows x 10,000 tokens" in err[0] and "at most beam_size=" in err[0]
    with pytest.raises(SystemExit) as e:
        main(["generate", "the", "--max-memory", "lots"])
    assert e.value.code == 2 and "--max-memory: not a memory size: 'lots'" in capfd.readouterr().err


def test_parse_size():
    assert parse_size("8G") == 8 * 2**30 and parse_size("512M") == 512 * 2**20 and parse_size(1000) == 1000
    assert parse_size("1.5GiB") == int(1.5 * 2**30) and parse_size("2kb") == 2048
    with pytest.raises(ValueError):
        parse_size("-1G")


def test_the_decoders_called_directly_check_too(model):
    """``beam_search(..., beam_size=10**6)`` used to allocate until the machine ran out; each
    decoder now refuses before allocating, as generate() does, and takes ``max_memory``."""
    import time

    import decodekit

    calls = {
        "beam search": lambda **kw: decodekit.beam_search(model, [2], 10**6, 5, **kw),
        "masked beam search": lambda **kw: decodekit.beam_search(model, [2], 10**6, 5, constraint=".*", **kw),
        "constrained beam search": lambda **kw: decodekit.constrained_beam_search(
            model, [2], r".*\bprofit\b.*", 10**5, 5, **kw
        ),
        "sampling": lambda **kw: decodekit.sample(model, [2], 5, num_samples=10**7, **kw),
        "greedy search": lambda **kw: decodekit.greedy(model, [[2]] * 10**6, 5, **kw),
    }
    for what, call in calls.items():
        start = time.process_time()
        with pytest.raises(ResourceError, match=f"this {what}.*the given limit"):
            call(max_memory="100M")
        assert time.process_time() - start < 5, what
    assert decodekit.beam_search(model, [2], 3, 4, max_memory="100M")


def test_masked_beam_advice_names_the_beam_size(model):
    config = GenerationConfig(strategy="masked-beam", constraint=r".*\bprofit\b.*", beam_size=10_000)
    with pytest.raises(ResourceError, match="at most beam_size=[0-9,]+ fits"):
        generate(model, [[2, 3]], config, max_memory="20M")


_RLIMIT_CHILD = """
import resource
from decodekit.decoding import memory
unlimited = memory.available_memory("cpu")
with open("/proc/self/statm") as f:
    size = int(f.read().split()[0]) * resource.getpagesize()
room = 256 * 2**20
resource.setrlimit(resource.RLIMIT_AS, (size + room, resource.getrlimit(resource.RLIMIT_AS)[1]))
print(unlimited, memory.available_memory("cpu"), room)
"""


def test_the_estimate_honours_ulimit_v():
    """``ulimit -v`` (RLIMIT_AS) caps what a search may use: issue 35.11 found the estimate
    ignoring it (a search allowed gigabytes died in MemoryError instead of a one-line refusal)."""
    import resource
    import subprocess
    import sys

    if resource.getrlimit(resource.RLIMIT_AS)[1] != resource.RLIM_INFINITY:
        pytest.skip("a hard address-space limit is set already")
    out = subprocess.run([sys.executable, "-c", _RLIMIT_CHILD], capture_output=True, text=True, check=True)
    unlimited, limited, room = map(int, out.stdout.split())
    assert 0 < limited <= room < unlimited


def test_tokens_fed_ahead_are_counted(model):
    """fast_forward and draft_forced_text feed up to 1 + MAX_FORCED tokens a call: their
    distributions (logits and log-softmax) count, and a drafted stretch's earlier state too."""
    from decodekit.decoding.ahead import MAX_FORCED

    config = GenerationConfig(strategy="masked-beam", beam_size=8, constraint="the (company|market) .*")
    plain = estimate(model, [2], config)
    forward = estimate(model, [2], config.replace(fast_forward=True))
    drafted = estimate(model, [2], config.replace(fast_forward=True, draft_forced_text=True))
    assert memory.FED_AHEAD == 1 + MAX_FORCED
    block = plain.rows * model.vocab_size * 4 * memory.FED_AHEAD * 2
    assert forward.parts["scores"] - plain.parts["scores"] == block
    assert forward.parts["state"] == plain.parts["state"] < drafted.parts["state"]
