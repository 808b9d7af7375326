"""The step protocol, checked the same way for every model class decodekit ships: each registry
entry (and variants), the four stacks of ``StackLSTM``, ``NgramLM``, ``MixtureLM`` and
``HuggingFaceLM`` (a tiny random GPT-2, skipped without transformers).

* log-probabilities are normalised over V (logsumexp 0, no NaN);
* ``step`` never writes into its input state (nor do ``select`` / ``concat``);
* ``prefill`` and ``step_many`` equal repeated ``step``, and so does a full-sequence forward
  where there is one;
* ``select`` and ``concat`` move whole rows: checked row by row against each prompt run alone
  (never sums over rows: a shuffled state has the same sums);
* a batch gives what each row gives alone;
* ``stream_logprobs`` (the one stream scorer) equals batch-1 stepping, across chunk boundaries;
* ``.to("cpu")`` (and ``.to("cuda")`` when there is a GPU) keeps the outputs.

Model-specific behaviour (formulas, reference implementations, errors) stays in the per-model files.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import pytest
import torch

from decodekit.models.base import step_many
from decodekit.models.controls import Controlled
from decodekit.models.kneser_ney import train_kneser_ney
from decodekit.models.mixture import MixtureLM
from decodekit.models.neural import NeuralLM
from decodekit.models.registry import MODELS, create_model, make_config
from decodekit.models.scoring import stream_logprobs
from decodekit.models.state import concat, select
from decodekit.models.suppress import Suppressed
from decodekit.vocab import WordVocab

VOCAB = WordVocab(["<unk>", "<eos>", "a", "b", "c", "d", "e"])
V = len(VOCAB)
TINY = {
    "lstm": {"embed": 6, "hidden": 5, "layers": 2},
    "rnn": {"embed": 6, "hidden": 5, "layers": 2},
    "mlp": {"order": 3, "embed": 4, "hidden": 5},
    "stack-lstm": {"embed": 4, "hidden": 6, "init_range": 0.5},
}
STACKS = {
    "superposition": dict(stack="superposition", stack_embed=3),
    "superposition-depth2": dict(stack="superposition", stack_embed=3, depth=2),
    "superposition-push-h": dict(stack="superposition", stack_embed=6, push_hidden=True),
    "stratification": dict(stack="stratification", stack_embed=3),
    "stratification-depth3": dict(stack="stratification", stack_embed=3, depth=3),
    "ns": dict(stack="ns", stack_states=2, stack_symbols=2),
    "rns": dict(stack="rns", stack_states=2, stack_symbols=3),
    "rns-window3": dict(stack="rns", stack_states=2, stack_symbols=2, window=3),
    "ns-replaceable-window3": dict(
        stack="ns", stack_states=2, stack_symbols=2, window=3, bottom="replaceable"
    ),
}


def neural(kind: str, **fields: Any) -> NeuralLM:
    torch.manual_seed(0)
    return create_model(make_config(kind, **{**TINY.get(kind, {}), **fields}), VOCAB).double().eval()


def ngram(order: int, eos: bool = True):
    ids = torch.randint(0, V, (400,), generator=torch.Generator().manual_seed(order))
    return train_kneser_ney(
        ids, order, V, VOCAB.eos_id if eos else None, vocab=VOCAB if eos else None,
        discounts=[(0.5, 1.0, 1.5)] * order,
    )  # fmt: skip


def gpt2():
    transformers = pytest.importorskip("transformers", reason="HuggingFaceLM needs transformers")
    from decodekit.models.hf import HuggingFaceLM

    torch.manual_seed(0)
    config = transformers.GPT2Config(
        vocab_size=V, n_positions=64, n_embd=16, n_layer=2, n_head=2, bos_token_id=1, eos_token_id=1
    )
    return HuggingFaceLM(transformers.GPT2LMHeadModel(config).eval())


def gpt2_native():
    """:func:`gpt2`'s weights through decodekit's own GPT-2 forward (models/gpt2.py), as load_hf
    runs a saved GPT-2 directory."""
    pytest.importorskip("safetensors", reason="decodekit's GPT-2 reads safetensors weights")
    import tempfile
    from pathlib import Path

    from decodekit.models.gpt2 import native_model
    from decodekit.models.hf import HuggingFaceLM

    with tempfile.TemporaryDirectory() as folder:
        gpt2().model.save_pretrained(folder)
        return HuggingFaceLM(native_model(Path(folder)))


def neural_forward(model: NeuralLM, x: torch.Tensor) -> torch.Tensor:
    return torch.log_softmax(model(x)[0].float(), -1)


def hf_forward(lm, x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return torch.log_softmax(lm.model(x).logits.float(), -1)


@dataclasses.dataclass(frozen=True)
class Case:
    build: Callable[[], Any]
    tol: float = 1e-6  # float64 networks; float32 tables and transformers get 1e-5
    forward: Callable[[Any, torch.Tensor], torch.Tensor] | None = None  # logprobs [N, T, V]


CASES: dict[str, Case] = {
    **{kind: Case(functools.partial(neural, kind), forward=neural_forward) for kind in sorted(MODELS)},
    "lstm-tied": Case(
        functools.partial(neural, "lstm", embed=5, hidden=5, tie=True, layers=1), forward=neural_forward
    ),
    "rnn-tied": Case(functools.partial(neural, "rnn", embed=5, hidden=5, tie=True), forward=neural_forward),
    "mlp-no-hidden": Case(
        functools.partial(neural, "mlp", order=4, embed=3, hidden=0), forward=neural_forward
    ),
    "mlp-no-direct": Case(
        functools.partial(neural, "mlp", order=2, embed=3, hidden=4, direct=False), forward=neural_forward
    ),
    **{
        f"stack-{name}": Case(functools.partial(neural, "stack-lstm", **fields), forward=neural_forward)
        for name, fields in STACKS.items()
    },
    "ngram-kn3": Case(functools.partial(ngram, 3), tol=1e-5),
    "ngram-kn1": Case(functools.partial(ngram, 1), tol=1e-5),
    "ngram-kn2-no-eos": Case(functools.partial(ngram, 2, eos=False), tol=1e-5),
    "mixture": Case(lambda: MixtureLM([ngram(3), neural("lstm")], [0.3, 0.7]), tol=1e-5),
    "hf-gpt2": Case(gpt2, tol=1e-5, forward=hf_forward),
    "hf-gpt2-native": Case(gpt2_native, tol=1e-5, forward=hf_forward),
    "suppressed-lstm": Case(lambda: Suppressed(neural("lstm"), [2, 5])),
    "controlled-lstm": Case(
        lambda: Controlled(neural("lstm"), repetition_penalty=1.4, no_repeat_ngram_size=2)
    ),
}
NAMES = sorted(CASES)


@functools.cache
def model_of(name: str):
    return CASES[name].build()


def tokens(n: int, t: int, seed: int) -> torch.Tensor:
    return torch.randint(0, V, (n, t), generator=torch.Generator().manual_seed(seed))


def steps(model, state, x: torch.Tensor) -> tuple[list[torch.Tensor], Any]:
    """Step over x [N, T] column by column. Returns ([logprobs [N, V]] * T, state)."""
    out = []
    for t in range(x.shape[1]):
        logprobs, state = model.step(state, x[:, t])
        out.append(logprobs)
    return out, state


def leaves(obj) -> list[torch.Tensor]:
    """Every tensor in a state: pytrees, dataclasses (HFState) and transformers caches (layers)."""
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, dict):
        obj = list(obj.values())
    if dataclasses.is_dataclass(obj):
        obj = [getattr(obj, f.name) for f in dataclasses.fields(obj)]
    if hasattr(obj, "layers"):
        obj = [(getattr(layer, "keys", None), getattr(layer, "values", None)) for layer in obj.layers]
    if isinstance(obj, (tuple, list)):
        return [t for item in obj for t in leaves(item)]
    return []


def close(a: torch.Tensor, b: torch.Tensor, tol: float) -> None:
    torch.testing.assert_close(a, b, rtol=0, atol=tol)


@pytest.mark.parametrize("name", NAMES)
def test_logprobs_are_normalised(name):
    model = model_of(name)
    logprobs, state = model.prefill(model.initial_state(3), tokens(3, 4, seed=1))
    later, _ = steps(model, state, tokens(3, 3, seed=2))
    for lp in [logprobs, *later]:
        assert lp.shape == (3, model.vocab_size) and not lp.isnan().any()
        close(torch.logsumexp(lp.double(), -1), torch.zeros(3, dtype=torch.double), 1e-5)


@pytest.mark.parametrize("name", NAMES)
def test_step_select_and_concat_never_write_into_a_state(name):
    model = model_of(name)
    _, state = model.prefill(model.initial_state(3), tokens(3, 3, seed=3))
    before = [t.clone() for t in leaves(state)]
    x = tokens(3, 1, seed=4)[:, 0]
    first, stepped = model.step(state, x)
    model.step(stepped, x)  # stepping on from the new state leaves the old one alone too
    model.step(state, tokens(3, 1, seed=5)[:, 0])
    select(state, torch.tensor([2, 2, 0]), model)
    concat([state, state], model)
    again, _ = model.step(state, x)
    after = leaves(state)
    assert len(after) == len(before) > 0
    for a, b in zip(before, after, strict=True):
        assert torch.equal(a, b)
    assert torch.equal(first, again)


@pytest.mark.parametrize("name", NAMES)
def test_prefill_equals_repeated_step(name):
    model, tol = model_of(name), CASES[name].tol
    x = tokens(2, 5, seed=6)
    lp_prefill, s_prefill = model.prefill(model.initial_state(2), x)
    lps, s_steps = steps(model, model.initial_state(2), x)
    close(lp_prefill, lps[-1], tol)
    nxt = tokens(2, 1, seed=7)[:, 0]  # continuing from either state gives the same distribution
    close(model.step(s_prefill, nxt)[0], model.step(s_steps, nxt)[0], tol)


@pytest.mark.parametrize("name", NAMES)
def test_step_many_equals_repeated_step(name):
    model, tol = model_of(name), CASES[name].tol
    _, state = model.prefill(model.initial_state(3), tokens(3, 3, seed=20))
    x = tokens(3, 4, seed=21)
    lp_many, s_many = step_many(model, state, x)
    lps, s_steps = steps(model, state, x)
    assert lp_many.shape == (3, 4, model.vocab_size)
    close(lp_many, torch.stack(lps, 1).to(lp_many.dtype), tol)
    nxt = tokens(3, 1, seed=22)[:, 0]  # and the state after all L tokens is the same
    close(model.step(s_many, nxt)[0], model.step(s_steps, nxt)[0], tol)
    one, _ = step_many(model, state, x[:, :1])  # L = 1 is one step
    close(one[:, 0], lps[0], tol)


@pytest.mark.parametrize("name", NAMES)
def test_step_many_keeps_the_last_positions_asked(name):
    """``keep_last=k``: the last k of the L distributions (the model's own method skipping the
    others' output layer, or a slice), and the same state after all L tokens."""
    model, tol = model_of(name), CASES[name].tol
    _, state = model.prefill(model.initial_state(2), tokens(2, 3, seed=23))
    x = tokens(2, 4, seed=24)
    every, s_every = step_many(model, state, x)
    nxt = tokens(2, 1, seed=25)[:, 0]
    for k in (0, 1, 3, 4):
        kept, s_kept = step_many(model, state, x, keep_last=k)
        assert kept.shape == (2, k, model.vocab_size)
        close(kept, every[:, 4 - k :], tol)
        close(model.step(s_kept, nxt)[0], model.step(s_every, nxt)[0], tol)
    with pytest.raises(ValueError, match="keep_last=5 is not within 0..4"):
        step_many(model, state, x, keep_last=5)


def test_step_many_of_a_model_without_keep_last_is_sliced():
    """A user's ``step_many(state, tokens)`` predating ``keep_last`` still serves it: the
    distributions are cut after its call (the default loop of ``step`` likewise)."""
    inner = model_of("lstm")

    class OwnStepMany:
        vocab_size, bos_id, eos_id = inner.vocab_size, inner.bos_id, inner.eos_id
        initial_state, step = inner.initial_state, inner.step

        def step_many(self, state, tokens):
            return inner.step_many(state, tokens)

    class StepOnly:
        vocab_size, bos_id, eos_id = inner.vocab_size, inner.bos_id, inner.eos_id
        initial_state, step = inner.initial_state, inner.step

    x = tokens(2, 4, seed=26)
    every, _ = step_many(inner, inner.initial_state(2), x)
    for model in (OwnStepMany(), StepOnly()):
        kept, _ = step_many(model, model.initial_state(2), x, keep_last=2)
        close(kept, every[:, 2:], CASES["lstm"].tol)


@pytest.mark.parametrize("name", NAMES)
def test_select_moves_whole_rows(name):
    model, tol = model_of(name), CASES[name].tol
    x = tokens(4, 4, seed=8)
    _, state = model.prefill(model.initial_state(4), x)
    rows = torch.tensor([2, 0, 0, 3, 1])
    nxt = tokens(5, 2, seed=9)
    got, _ = steps(model, select(state, rows, model), nxt)
    for i, r in enumerate(rows.tolist()):  # row by row against that prompt alone
        _, alone = model.prefill(model.initial_state(1), x[r : r + 1])
        want, _ = steps(model, alone, nxt[i : i + 1])
        for g, w in zip(got, want):
            close(g[i : i + 1], w, tol)


@pytest.mark.parametrize("name", NAMES)
def test_concat_joins_rows_of_prompts_of_different_lengths(name):
    model, tol = model_of(name), CASES[name].tol
    a, b = tokens(2, 2, seed=10), tokens(1, 5, seed=11)
    _, sa = model.prefill(model.initial_state(2), a)
    _, sb = model.prefill(model.initial_state(1), b)
    nxt = tokens(3, 2, seed=12)
    got, _ = steps(model, concat([sa, sb], model), nxt)
    want_a, _ = steps(model, sa, nxt[:2])
    want_b, _ = steps(model, sb, nxt[2:])
    for g, wa, wb in zip(got, want_a, want_b):
        close(g, torch.cat([wa, wb]), tol)


@pytest.mark.parametrize("name", NAMES)
def test_a_batch_equals_each_row_alone(name):
    model, tol = model_of(name), CASES[name].tol
    x = tokens(3, 6, seed=13)
    lp, state = model.prefill(model.initial_state(3), x[:, :3])
    batch, _ = steps(model, state, x[:, 3:])
    for i in range(3):
        lp_i, state_i = model.prefill(model.initial_state(1), x[i : i + 1, :3])
        alone, _ = steps(model, state_i, x[i : i + 1, 3:])
        for g, w in zip([lp, *batch], [lp_i, *alone]):
            close(g[i : i + 1], w, tol)


@pytest.mark.parametrize("name", NAMES)
def test_stream_logprobs_equals_stepping_with_batch_1(name):
    model, tol = model_of(name), CASES[name].tol
    ids = tokens(1, 11, seed=14)[0]
    state, want = model.initial_state(1), []
    if model.bos_id is not None:  # fed first: every token is predicted
        lp, state = model.step(state, torch.tensor([model.bos_id]))
        rest = ids
    elif hasattr(model, "initial_logprobs"):  # predicts the first token from the empty context
        lp, rest = model.initial_logprobs(state), ids
    else:  # the first token is context only
        lp, state = model.step(state, ids[:1])
        rest = ids[1:]
    for token in rest.tolist():
        want.append(lp[0, token])
        lp, state = model.step(state, torch.tensor([token]))
    got = stream_logprobs(model, ids, chunk=4)  # chunk boundaries carry the state
    close(got, torch.stack(want).float(), tol)


@pytest.mark.parametrize("name", NAMES)
def test_full_sequence_forward_equals_incremental_steps(name):
    model, case = model_of(name), CASES[name]
    if case.forward is None:
        pytest.skip(f"{type(model).__name__} has no full-sequence forward")
    x = tokens(3, 6, seed=15)
    full = case.forward(model, x)  # [N, T, V]
    lps, _ = steps(model, model.initial_state(3), x)
    close(torch.stack(lps, 1), full, case.tol)
    if isinstance(model, NeuralLM):  # two chunks with the state carried (truncated BPTT) == one pass
        logits, _ = model(x)
        _, mid = model(x[:, :4])
        close(model(x[:, 4:], mid)[0], logits[:, 4:], 1e-10)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_device_moves_keep_the_outputs(name, device):
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    model, tol = model_of(name), CASES[name].tol
    x = tokens(2, 4, seed=16)
    want, _ = model.prefill(model.initial_state(2), x)
    try:
        assert model.to(device) is model
        got, state = model.prefill(model.initial_state(2), x.to(device))
        assert got.device.type == device and all(t.device.type == device for t in leaves(state))
        close(got.cpu(), want, tol if device == "cpu" else 1e-4)
    finally:
        model.to("cpu")
