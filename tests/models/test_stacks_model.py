"""StackLSTM with every stack: the vector stacks match loop references of the paper's equations,
bad configs fail, gradients, recomputation, decoders over batches, checkpoints. (Incremental
decoding == forward, reordering and joining states: tests/models/test_conformance.py.)"""

from __future__ import annotations

import pytest
import torch

from decodekit.errors import DecodekitError
from decodekit.models.stack import StackLSTM, StackLSTMConfig
from decodekit.models.stack.stratification import StratificationStack
from decodekit.models.stack.superposition import SuperpositionStack
from decodekit.vocab import CharVocab
from tests.models.test_conformance import STACKS

VOCAB = CharVocab(["<eos>", "a", "b", "#"], unk=None)
CONFIGS = STACKS  # the stack settings the conformance suite runs


def make(name, seed=0):
    torch.manual_seed(seed)
    config = StackLSTMConfig(embed=4, hidden=6, init_range=0.5, **CONFIGS[name])
    return StackLSTM(config, VOCAB).double().eval()


def tokens(n, t, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, len(VOCAB), (n, t), generator=g)


def test_superposition_matches_loop_reference():
    torch.manual_seed(0)
    stack = SuperpositionStack(4, 2, depth=3).double()
    hs = torch.randn(5, 1, 4, dtype=torch.float64)
    state, _ = stack.initial(1, hs)
    cells = [[0.0, 0.0] for _ in range(3)]
    for h in hs:
        state, reading = stack(state, h)
        push, noop, pop = torch.softmax(stack.actions(h), -1)[0].tolist()
        v = torch.sigmoid(stack.push_value(h))[0].tolist()
        below = [*cells, [0.0, 0.0]]
        cells = [
            [
                push * (v if i == 0 else cells[i - 1])[k] + noop * cells[i][k] + pop * below[i + 1][k]
                for k in range(2)
            ]
            for i in range(3)
        ]
        torch.testing.assert_close(state[0], torch.tensor(cells, dtype=torch.float64))
        torch.testing.assert_close(reading[0], torch.tensor(cells[0], dtype=torch.float64))


def test_stratification_matches_loop_reference():
    torch.manual_seed(0)
    stack = StratificationStack(4, 2).double()
    hs = torch.randn(6, 1, 4, dtype=torch.float64)
    state, _ = stack.initial(1, hs)
    values, strengths = [], []
    for h in hs:
        state, reading = stack(state, h)
        d, u = torch.sigmoid(stack.actions(h))[0].tolist()
        new = []
        for i in range(len(strengths)):  # Grefenstette et al. (2015), eq. for s_t[i]
            above = sum(strengths[i + 1 :])
            new.append(max(0.0, strengths[i] - max(0.0, u - above)))
        strengths = [*new, d]
        values.append(torch.tanh(stack.push_value(h))[0])
        want = sum(
            min(strengths[i], max(0.0, 1 - sum(strengths[i + 1 :]))) * values[i] for i in range(len(values))
        )
        torch.testing.assert_close(state[1][0], torch.tensor(strengths, dtype=torch.float64))
        torch.testing.assert_close(reading[0], want)


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        (dict(stack="rns", stack_states=0), "stack_states"),
        (dict(stack="ns", stack_symbols=1), "stack_symbols"),
        (dict(stack="rns", window=0), "window"),
        (dict(stack="superposition", depth=0), "depth"),
        (dict(stack="stratification", depth=0), "depth"),
        (dict(stack="queue"), "unknown stack"),
        (dict(stack="rns", bottom="none"), "bottom"),
        (dict(stack="rns", hidden=0), "hidden"),
    ],
)
def test_bad_config(fields, match):
    with pytest.raises(DecodekitError, match=match):
        StackLSTM(StackLSTMConfig(**fields), VOCAB)


def test_unlimited_ns_rejects_long_sequences():
    model = StackLSTM(StackLSTMConfig(stack="ns", max_length=4), VOCAB)
    model(tokens(1, 4))
    with pytest.raises(DecodekitError, match="memory-limited"):
        model(tokens(1, 5))


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_backward_finite(name):
    model = make(name).float().train()
    logits, _ = model(tokens(2, 5))
    torch.log_softmax(logits, -1)[..., 0].sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


def test_registered_in_model_registry():
    from decodekit.models.registry import config_from_dict, config_to_dict, create_model, make_config

    config = make_config("stack-lstm", stack="rns", window=35, stack_states=3)
    assert config_from_dict(config_to_dict(config)) == config
    model = create_model(config, VOCAB)
    assert isinstance(model, StackLSTM) and model.stack.window == 35 and model.stack.num_states == 3
    assert config.bottom == "frozen" and model.stack.bottom == "frozen"  # DuSell & Chiang's definition
    legacy = make_config("stack-lstm", stack="ns", window=35, bottom="replaceable")
    assert config_from_dict(config_to_dict(legacy)) == legacy
    assert create_model(legacy, VOCAB).stack.bottom == "replaceable"


@pytest.mark.parametrize("name", ["stratification", "rns", "rns-window3"])
def test_decoders_batch_prompts_of_different_lengths(name):
    from decodekit import beam_search, greedy

    model = make(name).float()
    prompts = [[1, 2], [1, 2, 3, 1, 1], [3]]
    batched = beam_search(model, prompts, beam_size=3, max_length=6, n_best=2)
    for prompt, hyps in zip(prompts, batched):
        alone = beam_search(model, prompt, beam_size=3, max_length=6, n_best=2)
        assert [h.tokens for h in hyps] == [h.tokens for h in alone]
        assert [h.logprob for h in hyps] == pytest.approx([h.logprob for h in alone], abs=1e-5)
    first = greedy(model, prompts, max_length=6)
    for prompt, hyps in zip(prompts, first):
        assert hyps[0].tokens == greedy(model, prompt, max_length=6)[0].tokens


def test_docs_python_blocks_run():
    import re
    from pathlib import Path

    doc = Path(__file__).resolve().parents[2] / "docs" / "stack_rnns.md"
    namespace: dict = {}
    for i, code in enumerate(re.findall(r"```python\n(.*?)```", doc.read_text(encoding="utf-8"), re.S)):
        exec(compile(code, f"stack_rnns.md[block {i}]", "exec"), namespace)
    assert isinstance(namespace["model"], StackLSTM)


@pytest.mark.parametrize("name", ["ns", "rns-window3", "stratification"])
def test_recompute_gives_same_outputs_and_gradients(name):
    x = tokens(2, 7)
    results = []
    for recompute in (False, True):
        torch.manual_seed(0)
        config = StackLSTMConfig(embed=4, hidden=6, init_range=0.5, recompute=recompute, **CONFIGS[name])
        model = StackLSTM(config, VOCAB).double()
        logits, _ = model(x)
        logits.square().sum().backward()
        results.append((logits.detach(), [p.grad for p in model.parameters()]))
    torch.testing.assert_close(results[0][0], results[1][0], rtol=1e-12, atol=1e-12)
    for a, b in zip(results[0][1], results[1][1]):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


def test_checkpoints_without_a_bottom_field_load_with_the_bottom_they_were_trained_with(tmp_path):
    """NS/RNS checkpoints written before ``bottom`` existed used the replaceable bottom: they load
    with it (and reproduce their outputs); new checkpoints record the bottom they use."""
    import json

    from safetensors.torch import load_file, save_file

    from decodekit.checkpoint import load_checkpoint, save_checkpoint

    torch.manual_seed(0)
    model = StackLSTM(StackLSTMConfig(**CONFIGS["ns"], bottom="replaceable"), VOCAB).eval()
    save_checkpoint(model, tmp_path / "new")
    assert load_checkpoint(tmp_path / "new").config.bottom == "replaceable"
    assert (
        load_checkpoint(
            save_checkpoint(StackLSTM(StackLSTMConfig(**CONFIGS["rns"]), VOCAB), tmp_path / "f")
        ).config.bottom
        == "frozen"
    )
    # the same checkpoint as an older decodekit wrote it: no "bottom" anywhere
    legacy = save_checkpoint(model, tmp_path / "legacy")
    info = json.loads((legacy / "config.json").read_text())
    del info["model"]["bottom"]
    (legacy / "config.json").write_text(json.dumps(info))
    from safetensors import safe_open

    with safe_open(str(legacy / "model.safetensors"), "pt") as f:
        meta = dict(f.metadata())
    tensors = load_file(str(legacy / "model.safetensors"))
    meta["model"] = json.dumps(info["model"], sort_keys=True)
    meta["info"] = json.dumps(info, sort_keys=True)
    save_file(tensors, str(legacy / "model.safetensors"), metadata=meta)
    loaded = load_checkpoint(legacy)
    assert loaded.config.bottom == "replaceable"
    tokens = torch.tensor([[1, 2, 1, 3]])
    state = model.initial_state(1)
    expected, _ = model.prefill(state, tokens)
    got, _ = loaded.prefill(loaded.initial_state(1), tokens)
    assert torch.allclose(got, expected, atol=1e-6)
