"""Batch generation from JSON lines: resumable, one output record per input record.

Input: one JSON object per line, ``{"id": ..., "prompt": "text" | [token ids], ...}``, plus
optional per-line ``constraint`` and any :class:`GenerationConfig` option (``strategy``,
``max_length``, ``beam_size``, ...), which override the defaults given to the run.

Output: one JSON object per input line, in input order within each batch:
``{"id": ..., "hypotheses": [{"text", "tokens", "logprob", "score", "finished"}, ...]}``,
``"matched": false`` when a constrained search found nothing, or, for a malformed or
failing line, ``{"id": ... or null, "line": N, "error": "..."}``. Records with the same
options are decoded together, ``batch_size`` prompts per model call; the output is flushed
after every batch, so with ``resume=True`` an interrupted run skips the ids already written
and repeats nothing (a partial last line left by a crash is dropped first).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from decodekit.generation import GenerationConfig, generate
from decodekit.models.base import LanguageModel

PROMPT_KEYS = {"id", "prompt"}


@dataclass
class _Record:
    line: int
    id: object
    prompt: list[int] = field(default_factory=list)
    config: GenerationConfig | None = None


def read_done_ids(path: Path) -> set:
    """Ids already in an output file; drops a trailing partial line (an interrupted write)."""
    if not path.exists():
        return set()
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        cut = data.rfind(b"\n") + 1
        with open(path, "r+b") as f:
            f.truncate(cut)
        data = data[:cut]
    done = set()
    for raw in data.splitlines():
        try:
            record = json.loads(raw)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and "id" in record and record["id"] is not None:
            done.add(json.dumps(record["id"], sort_keys=True))
    return done


def parse_line(model: LanguageModel, number: int, text: str, defaults: GenerationConfig) -> _Record:
    """One input line -> a record (raises ValueError with a message for the error record)."""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"invalid JSON: {e.msg} at column {e.colno}") from None
    if not isinstance(obj, dict):
        raise ValueError("each line must be a JSON object with 'id' and 'prompt'")
    record = _Record(number, obj.get("id"))
    if "id" not in obj or obj["id"] is None:
        raise ValueError("missing 'id'")
    prompt = obj.get("prompt")
    if isinstance(prompt, str):
        vocab = getattr(model, "vocab", None)
        if vocab is None:
            raise ValueError("text prompts need a model with a vocabulary; give token ids")
        record.prompt = vocab.encode(prompt, warn_unknown=False)
    elif isinstance(prompt, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in prompt):
        record.prompt = prompt
    else:
        raise ValueError("'prompt' must be a string or a list of token ids")
    record.config = defaults.replace(**{k: v for k, v in obj.items() if k not in PROMPT_KEYS})
    record.config.resolved_strategy  # noqa: B018 -- validates the strategy name now
    return record


def generate_jsonl(
    model: LanguageModel,
    lines: Iterable[str],
    output: str | Path,
    defaults: GenerationConfig | None = None,
    *,
    batch_size: int = 16,
    resume: bool = False,
    progress: Callable[[int], None] | None = None,
    keep: Callable[[int], bool] | None = None,
    skip_ids: set | None = None,
) -> dict[str, int]:
    """Decode every JSON line of ``lines`` into ``output`` (see the module docstring).

    Args:
        keep: ``keep(line_number)`` selects this process's share of the lines (distributed runs).
        skip_ids: further ids (as ``json.dumps(id, sort_keys=True)``) to treat as done.
        progress: called with the number of records finished after each batch.

    Returns counts: ``{"written": ..., "skipped": ..., "errors": ...}``."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    defaults = defaults or GenerationConfig()
    output = Path(output)
    done = (read_done_ids(output) if resume else set()) | (skip_ids or set())
    if not resume and output.exists():
        output.unlink()
    vocab = getattr(model, "vocab", None)
    counts = {"written": 0, "skipped": 0, "errors": 0}
    pending: dict[GenerationConfig, list[_Record]] = {}
    with open(output, "a", encoding="utf-8") as out:

        def emit(records: list[dict]) -> None:
            for r in records:
                out.write(json.dumps(r, ensure_ascii=False) + "\n")
            out.flush()
            os.fsync(out.fileno())
            if progress is not None:
                progress(len(records))

        def flush(config: GenerationConfig) -> None:
            batch = pending.pop(config)
            try:
                results = generate(model, [r.prompt for r in batch], config)
            except ValueError as e:  # bad options or constraint: report on every line of the batch
                emit([{"id": r.id, "line": r.line, "error": str(e)} for r in batch])
                counts["errors"] += len(batch)
                return
            emit([_result_record(r, hyps, vocab) for r, hyps in zip(batch, results)])
            counts["written"] += len(batch)

        for number, text in enumerate(lines, start=1):
            if not text.strip() or (keep is not None and not keep(number)):
                continue
            try:
                record = parse_line(model, number, text, defaults)
            except ValueError as e:
                rid = _peek_id(text)
                if rid is not None and json.dumps(rid, sort_keys=True) in done:
                    continue
                emit([{"id": rid, "line": number, "error": str(e)}])
                counts["errors"] += 1
                continue
            if json.dumps(record.id, sort_keys=True) in done:
                counts["skipped"] += 1
                continue
            pending.setdefault(record.config, []).append(record)
            if len(pending[record.config]) >= batch_size:
                flush(record.config)
        for config in list(pending):
            flush(config)
    return counts


def merge_parts(output: str | Path, parts: list[Path], *, resume: bool) -> None:
    """Join per-rank part files into ``output`` (kept records first when resuming), dropping
    duplicate ids, atomically (temp file + rename); the parts are removed afterwards."""
    output = Path(output)
    seen: set = set()
    merged: list[str] = []
    sources = ([output] if resume and output.exists() else []) + parts
    for path in sources:
        if not path.exists():
            continue
        read_done_ids(path)  # drops a partial last line
        for raw in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(raw)
            key = json.dumps(record.get("id"), sort_keys=True) if record.get("id") is not None else None
            if key is not None and key in seen:
                continue
            if key is not None:
                seen.add(key)
            merged.append(raw)
    tmp = output.with_name(output.name + ".tmp")
    tmp.write_text("".join(line + "\n" for line in merged), encoding="utf-8")
    os.replace(tmp, output)
    for path in parts:
        path.unlink(missing_ok=True)


def part_path(output: str | Path, rank: int) -> Path:
    """Where rank ``rank`` writes its share of a distributed run."""
    output = Path(output)
    return output.with_name(f"{output.name}.rank{rank}")


def _result_record(record: _Record, hyps, vocab) -> dict:
    out = {"id": record.id, "hypotheses": [h.to_dict(vocab) for h in hyps]}
    if record.config.constraint is not None and not hyps:
        out["matched"] = False
    return out


def _peek_id(text: str):
    try:
        obj = json.loads(text)
    except json.JSONDecodeError:
        return None
    return obj.get("id") if isinstance(obj, dict) else None
