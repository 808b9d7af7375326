"""How much memory a search needs, estimated before it starts, and refusing what cannot fit.

A search over N rows (prompts x beams, samples or automaton states x beams) holds a few
``[N, V]`` float32 tensors at every step (under ``fast_forward`` or ``draft_forced_text`` the
distributions of up to 33 tokens fed ahead, and a drafted stretch's earlier state), the model's
state for N rows, the token history
(``max_length`` steps) and, while the prompts are encoded, activations for every prompt token.
:func:`estimate` adds these up (a deliberately generous sum of the peak tensors); :func:`check`
compares the sum with the memory available (``/proc/meminfo``'s MemAvailable, the cgroup limit
and what ``ulimit -v`` (RLIMIT_AS) leaves of the address space on the host, free memory on a
CUDA device; 90 % of it, or ``DECODEKIT_MAX_MEMORY``, or the
``limit`` given) and raises :class:`ResourceError` naming the largest setting that would fit, so
``--beam-size 100000`` is a one-line error instead of 40 GB and a traceback.

What the sum reads of the search comes from its strategy, ``config.search``
(:class:`decodekit.decoding.strategies.Strategy`: its rows per prompt and working set, whether it
ranks, the automaton states it needs); ``config`` is a ``GenerationConfig`` or, from the decoders
called directly, their :class:`~decodekit.decoding.strategies.Settings`.

The model's state is measured, not guessed: one row is encoded (1 and then 2 tokens) and the
bytes of every tensor in the state are counted, giving a per-row size and a per-token growth (a
transformers KV cache grows; an LSTM state does not). This is done once per model.
"""

from __future__ import annotations

import dataclasses
import os
import re
import weakref
from dataclasses import dataclass
from typing import Any

import torch

from decodekit.errors import ConfigError, ResourceError
from decodekit.models.base import model_device, prefill

FLOAT = 4  # bytes per log-probability (every strategy works in float32)
TRACE_STEP = 800  # Python and allocator overhead of the two small tensors a beam step records
PY_TOKEN = 52  # a token in the final Python lists: list slots, an int object, the Hypothesis tuple
PROMPT_TOKEN = 60  # a prompt token: the Python list and the [B, T] id tensor
SAFETY = 0.9  # use at most this fraction of the free memory
FED_AHEAD = 33  # tokens a call feeds ahead at most: 1 + decoding/ahead.py's MAX_FORCED (tested equal)


@dataclass(frozen=True)
class Estimate:
    """Bytes a search needs: ``device`` (tensors where the model runs) and ``host`` (the Python
    lists of the results, plus everything else for a model on the CPU); ``parts`` by cause;
    ``rows`` N."""

    device: int
    host: int
    parts: dict[str, int]
    rows: int


_PROFILES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_IDS: dict[int, tuple[int, int]] = {}  # models that cannot be weakly referenced


def parse_size(text: str | int) -> int:
    """``"8G"``, ``"512M"``, ``"1.5GB"``, ``"2GiB"`` or a byte count -> bytes."""
    if isinstance(text, int):
        return text
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([kmgt]?)(i?b)?\s*", str(text).lower())
    if not m:
        raise ConfigError(f"not a memory size: {text!r} (e.g. 8G, 512M, 2GiB or a number of bytes)")
    return int(float(m.group(1)) * 1024 ** "_kmgt".index(m.group(2) or "_"))


def human(n: float) -> str:
    """Bytes as ``1.2 GB`` (powers of 1024)."""
    if n >= 2**50:
        return f"{n / 2**40:.2g} TB"
    for unit, scale in (("TB", 2**40), ("GB", 2**30), ("MB", 2**20), ("KB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} bytes"


def available_memory(device: torch.device | str | None = None) -> int:
    """Free memory on ``device``: a CUDA device's free memory (plus what torch's caching
    allocator holds unused), or the host's MemAvailable, capped by the cgroup's limit and by what
    RLIMIT_AS (``ulimit -v``) leaves of this process's address space."""
    device = torch.device(device or "cpu")
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return free + torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
    return _host_available()


def _host_available() -> int:
    free = None
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    free = int(line.split()[1]) * 1024
    except OSError:
        pass
    if free is None:
        try:
            free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):  # pragma: no cover - exotic platforms
            free = 2**40
    for limit_file, usage_file in (
        ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
        ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"),
    ):
        try:
            with open(limit_file, encoding="ascii") as f, open(usage_file, encoding="ascii") as g:
                limit, usage = f.read().strip(), int(g.read().strip())
        except (OSError, ValueError):
            continue
        if limit.isdigit() and int(limit) < 2**60:
            free = min(free, max(int(limit) - usage, 0))
        break
    room = _address_space_left()
    return free if room is None else min(free, room)


def _address_space_left() -> int | None:
    """What ``ulimit -v`` (RLIMIT_AS) leaves this process: the limit less its address space now
    (``/proc/self/statm``'s size); None without a limit or where it cannot be read."""
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft == resource.RLIM_INFINITY or soft < 0:
            return None
        with open("/proc/self/statm", encoding="ascii") as f:
            size = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (ImportError, OSError, ValueError, AttributeError):  # pragma: no cover - not Linux
        return None
    return max(soft - size, 0)


def memory_limit(device: torch.device | str | None = None, limit: int | str | None = None) -> int:
    """The bytes a search may use: ``limit``, else ``DECODEKIT_MAX_MEMORY``, else 90 % of the
    memory available on ``device``."""
    if limit is None:
        limit = os.environ.get("DECODEKIT_MAX_MEMORY") or None
    if limit is not None:
        return parse_size(limit)
    return int(SAFETY * available_memory(device))


def _nbytes(obj: Any, seen: set[int], depth: int = 0) -> int:
    """Bytes of the tensors reachable from ``obj`` (tuples, lists, dicts, dataclasses and plain
    objects such as a transformers cache), each storage counted once."""
    if isinstance(obj, torch.Tensor):
        key = obj.untyped_storage().data_ptr() if obj.numel() else id(obj)
        if key in seen:
            return 0
        seen.add(key)
        return obj.untyped_storage().nbytes()
    if depth > 6 or obj is None or isinstance(obj, (str, bytes, int, float, bool)):
        return 0
    if isinstance(obj, dict):
        items = obj.values()
    elif isinstance(obj, (list, tuple)):
        items = obj
    elif dataclasses.is_dataclass(obj):
        items = [getattr(obj, f.name) for f in dataclasses.fields(obj)]
    elif hasattr(obj, "__dict__"):
        items = list(vars(obj).values())
    else:
        return 0
    return sum(_nbytes(x, seen, depth + 1) for x in items)


def state_profile(model: Any, *, measure: bool = True) -> tuple[int, int]:
    """(bytes per row, bytes per row and token) of the model's state, measured on one row
    (``measure=False``: the measurement if made before, else (0, 0))."""
    try:
        cached = _PROFILES.get(model)
    except TypeError:
        cached = _IDS.get(id(model))
    if cached is not None or not measure:
        return cached or (0, 0)
    profile = _measure(model)
    try:
        _PROFILES[model] = profile
    except TypeError:
        _IDS[id(model)] = profile
    return profile


def _measure(model: Any) -> tuple[int, int]:
    token = next((t for t in (model.bos_id, model.eos_id, 0) if t is not None), 0)
    device = model_device(model)
    try:
        with torch.inference_mode():
            state = model.initial_state(1)
            x = torch.tensor([token], device=device)
            _, one = prefill(model, state, x.view(1, 1))
            _, two = model.step(one, x)
    except Exception:  # a model that cannot be probed is estimated from its scores alone
        return 0, 0
    a, b = _nbytes(one, set()), _nbytes(two, set())
    growth = max(b - a, 0)
    return max(a - growth, 0), growth


def _rows(model: Any, config: Any, prompts: int, constraint: Any = None) -> tuple[int, str, int]:
    """(rows N, the search in words, automaton states S or 0) of ``config.search``.

    One beam per automaton state counts the states of ``constraint``, what the plan step
    (``decoding.prompts.compile_constraint``) compiled: every state of a whole automaton
    (``num_states``), or, over a lazy one (Anderson-style search over the states as they are
    reached), the one it starts in: its rows grow with the states reached, checked as they grow
    (:func:`rows_guard`). A caller without the compiled constraint (splitting a batch to fit)
    gets the whole automaton's count from the compile cache, or 1 where it is refused for size."""
    strategy, states = config.search, 0
    if strategy.needs == "states":  # one beam per automaton state: count them
        if constraint is None:
            constraint = _states_constraint(model, config)
        states = getattr(constraint, "num_states", 1) if constraint is not None else 1
    return prompts * strategy.rows(config, states), strategy.describe(states), states


def _states_constraint(model: Any, config: Any) -> Any:
    """The whole automaton of ``config``'s constraint, or None where it is refused for size."""
    from decodekit.constraints import anderson_automaton
    from decodekit.constraints.build import is_grammar
    from decodekit.errors import NoBeamPerState

    if is_grammar(config.constraint):  # unboundedly many states: never one beam per state
        return None
    try:
        return anderson_automaton(config.constraint, model, exclude=getattr(config, "exclude", ()))
    except NoBeamPerState:
        return None


def rows_guard(model: Any, config: Any, prompts: int, limit: int | str | None = None):
    """For a search whose rows grow with the automaton states it reaches (Anderson-style search
    over visited states): ``guard(reached, states)``, raising :class:`ResourceError` when
    ``states`` beams of K rows per prompt (``states`` x K x ``prompts`` rows, the estimate of
    :func:`estimate` with that many states) no longer fit in the memory :func:`check` allows; the
    message names the ``reached`` states (reached so far, all steps together)."""
    device = model_device(model)
    budget = (memory_limit(device, limit), memory_limit("cpu", limit))
    lengths = [0] * prompts

    def guard(reached: int, states: int) -> None:
        est = estimate(model, lengths, config, measure=False, states=states)
        if not _fits(est, budget, device):
            host = device.type == "cpu" or est.device <= budget[0]
            need, have = (est.host, budget[1]) if host else (est.device, budget[0])
            raise ResourceError(
                f"this {config.search.what.split(' (')[0]} has reached {reached:,} automaton states, "
                f"{states:,} of them holding hypotheses at once: {_count(est.rows)} rows x "
                f"{model.vocab_size:,} tokens need about {human(need)}, more than the {human(have)} it "
                "may use; a smaller beam_size, a shorter max_length or a masked beam search "
                "(strategy='masked-beam') needs less"
            )

    return guard


def estimate(
    model: Any,
    prompt_lengths: list[int],
    config: Any,
    *,
    measure: bool = True,
    constraint: Any = None,
    states: int | None = None,
) -> Estimate:
    """The memory a search of ``config`` over prompts of these lengths needs (see the module doc;
    ``measure=False``: without probing the model's state unless that was done before;
    ``constraint``: the one the plan step compiled, whose states one beam per state counts
    (:func:`_rows`); ``states``: that count given instead)."""
    vocab, prompts = int(model.vocab_size), len(prompt_lengths)
    longest = max(prompt_lengths, default=0) + (model.bos_id is not None)
    if states is None:
        rows, _, states = _rows(model, config, prompts, constraint)
    else:
        rows = prompts * config.search.rows(config, states)
    rows, steps = min(rows, 2**80), min(config.max_length, 2**80)  # absurd sizes: no float overflow
    strategy = config.search
    per_row, per_token = state_profile(model, measure=measure)
    units = strategy.working_set(config)  # [N, V] float32 tensors alive at the peak of a step
    if strategy.needs != "states" and (config.constraint is not None or getattr(config, "exclude", ())):
        # masking (measured: sampling 5000 rows, 7.5 units in all): the allowed mask, a masked
        # copy, the check for rows that cannot go on
        units += 4
    scores = rows * vocab * FLOAT * units
    if strategy.ranked:  # each row's best min(K+1, V) tokens: values, indices, and their sums
        scores += rows * min(config.beam_size + 1, vocab) * (FLOAT + 8 + FLOAT)
    if states:
        scores += states * vocab * 8 * 3  # the automaton and the search plan, [S, V] each
    state = rows * (per_row + per_token * (longest + steps)) * 3  # old, reordered and new state
    ahead = getattr(config, "fast_forward", False), getattr(config, "draft_forced_text", False)
    if any(ahead):  # tokens fed ahead (decoding/ahead.py): up to FED_AHEAD distributions a row,
        scores += rows * vocab * FLOAT * FED_AHEAD * 2  # the model's logits and their log-softmax
    if ahead[1]:  # a drafted stretch keeps the state from before its call
        state += rows * (per_row + per_token * (longest + steps))
    head = getattr(getattr(model, "head", None), "in_features", 0) or 0
    encoded = min(longest, getattr(model, "prefill_chunk", None) or longest)  # tokens per model call
    prefill = prompts * encoded * (2 * per_row + 4 * per_token + FLOAT * head)  # PTB LSTM: 6 KB/token
    prefill += prompts * longest * PROMPT_TOKEN
    if strategy.ranked:  # back-pointers: parents and tokens of every row at every step
        history = steps * (16 * rows + TRACE_STEP)
        host = steps * rows * (PY_TOKEN + 16) + steps * TRACE_STEP
    else:
        history = steps * rows * 8
        host = steps * rows * PY_TOKEN
    parts = {"scores": int(scores), "state": int(state), "prefill": int(prefill), "history": int(history)}
    device = sum(parts.values())
    on_host = host if model_device(model).type != "cpu" else device + host
    return Estimate(device, int(on_host), {**parts, "results": int(host)}, rows)


def check(
    model: Any,
    prompts: list[list[int]],
    config: Any,
    *,
    limit: int | str | None = None,
    small: float = 0.0,
    constraint: Any = None,
) -> Estimate:
    """Raise :class:`ResourceError` if the search would not fit (see the module docstring).

    The message says how much it needs, how much may be used, and the largest setting of what
    dominates the need that fits: ``beam_size``, ``num_samples``, the number of prompts decoded
    together, the prompt length or ``max_length``. ``small``: a search whose estimate without
    the model's state is under this share of the budget passes without probing the model (the
    decoders called directly use 1 %, so that a small search makes no model call of its own).
    ``constraint``: what the plan step compiled (:func:`_rows`)."""
    lengths = [len(p) for p in prompts]
    device = model_device(model)
    budget = (memory_limit(device, limit), memory_limit("cpu", limit))
    if small:
        quick = estimate(model, lengths, config, measure=False, constraint=constraint)
        if quick.device <= small * budget[0] and quick.host <= small * budget[1]:
            return quick
    est = estimate(model, lengths, config, constraint=constraint)
    if _fits(est, budget, device):
        return est
    _, what, _ = _rows(model, config, len(lengths), constraint)
    host = device.type == "cpu" or est.device <= budget[0]  # what does not fit: host or device memory
    need, have = (est.host, budget[1]) if host else (est.device, budget[0])
    source = (
        "the given limit"
        if limit is not None
        else "DECODEKIT_MAX_MEMORY"
        if os.environ.get("DECODEKIT_MAX_MEMORY")
        else f"{int(SAFETY * 100)} % of the free {'host ' if host and device.type != 'cpu' else ''}memory"
    )
    advice = _advice(model, lengths, config, budget, device, est, constraint)
    raise ResourceError(
        f"this {what} needs about {human(need)} ({_count(est.rows)} rows x {model.vocab_size:,} tokens, "
        f"{_count(config.max_length)} steps, prompts of up to {max(lengths, default=0):,} tokens), more than "
        f"the {human(have)} it may use ({source}); {advice}"
    )


def _count(n: int) -> str:
    return f"{n:,}" if n < 10**15 else f"{float(n):.2g}"


def _fits(est: Estimate, budget: tuple[int, int], device: torch.device) -> bool:
    """On the CPU ``host`` holds everything; elsewhere the device and the host each must fit."""
    if device.type == "cpu":
        return est.host <= budget[1]
    return est.device <= budget[0] and est.host <= budget[1]


def _largest(low: int, high: int, ok) -> int | None:
    """The largest v in [low, high] with ok(v) (ok monotone: true up to some point), or None."""
    if high < low or not ok(low):
        return None
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if ok(mid) else (low, mid - 1)
    return low


def _advice(model, lengths: list[int], config: Any, budget, device, est: Estimate, constraint=None) -> str:
    def fits(lengths_=lengths, **changes) -> bool:
        return _fits(
            estimate(model, lengths_, config.replace(**changes), constraint=constraint), budget, device
        )

    parts = est.parts
    knob = config.search.knob
    # what the user made large comes first: the beams or samples (they scale the history too), then
    # the prompts decoded together, then the length; the prompt length first when encoding dominates
    tried = ["prompt"] if parts["prefill"] > sum(parts.values()) / 2 else []
    tried += ["knob", "prompts", "length", "prompt"]
    found: list[str] = []
    for what in dict.fromkeys(tried):
        if len(found) == 2:
            break
        if what == "knob" and knob is not None and getattr(config, knob) > 1:
            best = _largest(1, getattr(config, knob) - 1, lambda v: fits(**{knob: v}))
            found += [f"at most {knob}={best:,} fits"] if best is not None else []
        if what == "prompts" and len(lengths) > 1:
            best = _largest(1, len(lengths) - 1, lambda k: fits(lengths[:k]))
            found += [f"at most {best:,} prompts at a time fit"] if best is not None else []
        if what == "length" and config.max_length > 1:
            best = _largest(1, config.max_length - 1, lambda t: fits(max_length=t))
            found += [f"at most max_length={best:,} fits"] if best is not None else []
        if what == "prompt" and lengths and max(lengths) > 1:
            best = _largest(1, max(lengths) - 1, lambda n: fits([min(x, n) for x in lengths]))
            found += [f"prompts of at most {best:,} tokens fit"] if best is not None else []
    if not found:
        return "even the smallest search does not fit: free some memory or use a smaller model"
    return "; or ".join(found)
