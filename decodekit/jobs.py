"""Generation jobs over JSON lines: every input line gets exactly one record, resumably, in one
output file, from one process or from every rank of a torchrun run.

Input: one JSON object per line (UTF-8), ``{"id": ..., "prompt": "text" | [token ids], ...}``,
plus optional per-line ``constraint`` and any :class:`GenerationConfig` option (``strategy``,
``max_length``, ``beam_size``, ``seed``, ...), which override the run's defaults. Blank lines are
ignored. The format, the output and the guarantees are documented in docs/decoding.md ("Batch
generation").

Output: per line, ``{"id": ..., "prompt": ... (as the line wrote it), "hypotheses": [{"text",
"tokens", "logprob", "score", "finished"}, ...]}`` (plus ``"matched": false`` when a constrained
search found nothing), or an error record ``{"id": ... or null, "line": N, "error": "..."}``. A bad
line (invalid UTF-8 or JSON, nesting too deep, a bad option, an unknown or out-of-vocabulary token
id, a lone surrogate, a search too large for the memory, a duplicate id, a model failure) gets its
own error record and the other lines go on. With ``resume=True`` the ids with a result are skipped
and error records are dropped and retried (:mod:`decodekit.result_file`), so no record is ever
written twice.

Sampling with a seed draws each record from its own generator seeded by (seed, id)
(:func:`record_seed`): a record's samples do not depend on the batch size, on the other lines or on
resumption. Records with the same options are decoded together, ``batch_size`` prompts per call
(fewer when the memory estimate says a batch would not fit); seeded sampling decodes one record
(all its samples) per call.

Under torchrun (``WORLD_SIZE`` > 1) :func:`generate_jsonl` splits the work over the ranks: rank r
decodes lines r + 1, r + 1 + world, ... into its part file (:func:`part_path`), rank 0 holds the
output's lock for the whole run and merges the parts into the output at the end, and a failure
to start (the output locked or refused, a full disk) is raised on rank 0 and as
:class:`OtherRankError` on the others; so is a rank's failure to write its part (the parts
written are kept: ``resume`` takes their results). The output is the same file, with the same records, as one
process writes (in another order; a line repeating the id of another rank's earlier line gets
the same error record, each rank reading every line's id), and ``resume`` works the same.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import sys
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from decodekit import distributed
from decodekit import result_file as results
from decodekit.decoding.generation import GenerationConfig, generate
from decodekit.decoding.memory import check as check_memory
from decodekit.errors import ConfigError, DecodekitError
from decodekit.models.base import LanguageModel
from decodekit.util.files import MAX_LINE_BYTES, bounded_lines
from decodekit.util.locking import exclusive

PROMPT_KEYS = {"id", "prompt"}


class OtherRankError(DecodekitError):
    """Raised on the other ranks when one rank of a distributed run failed (rank 0 to start it,
    or any rank to write its part); that rank raises the reason itself."""


class LineError(DecodekitError):
    """A line that cannot be decoded; ``id`` is the line's id when it could be read."""

    def __init__(self, message: str, id: object = None) -> None:
        super().__init__(message)
        self.id = id


@dataclass
class _Record:
    line: int
    id: object
    key: str
    prompt: list[int]
    config: GenerationConfig
    given: object = None  # the line's "prompt" as written (text or ids), echoed in its record


def record_seed(seed: int, key: str) -> int:
    """The seed of one record: 63 bits of sha256(seed, canonical id)."""
    digest = hashlib.sha256(f"{seed}\0{key}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def _no_constants(name: str) -> None:
    raise ConfigError(f"{name} is not valid JSON")


def _load(text: str | bytes) -> object:
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as e:
            raise LineError(f"not valid UTF-8 (byte 0x{text[e.start]:02x} at column {e.start + 1})") from None
    try:
        obj = json.loads(text, parse_constant=_no_constants)
    except json.JSONDecodeError as e:
        raise LineError(f"invalid JSON: {e.msg} at column {e.colno}") from None
    except ValueError as e:
        raise LineError(f"invalid JSON: {e}") from None
    except RecursionError:
        raise LineError("invalid JSON: nested too deeply") from None
    try:
        json.dumps(obj, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as e:
        bad = e.object[e.start : e.end].encode("unicode_escape").decode()
        raise LineError(f"contains a lone surrogate ({bad}), which is not valid Unicode") from None
    return obj


def parse_line(model: LanguageModel, number: int, text: str | bytes, defaults: GenerationConfig) -> _Record:
    """One input line -> a record. Raises :class:`LineError` with the message of its error record."""
    obj = _load(text)
    if not isinstance(obj, dict):
        raise LineError("each line must be a JSON object with 'id' and 'prompt'")
    rid = obj.get("id")
    if rid is None:
        raise LineError("missing 'id'")
    try:
        config = defaults.replace(**{k: v for k, v in obj.items() if k not in PROMPT_KEYS})
        prompt = _prompt(model, obj.get("prompt"))
    except ValueError as e:
        raise LineError(str(e), rid) from None
    return _Record(number, rid, results.id_key(rid), prompt, config, obj.get("prompt"))


def _prompt(model: LanguageModel, prompt: object) -> list[int]:
    if isinstance(prompt, str):
        vocab = getattr(model, "vocab", None)
        if vocab is None:
            raise ConfigError("text prompts need a model with a vocabulary; give token ids")
        ids = vocab.encode(prompt, warn_unknown=False)
    elif isinstance(prompt, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in prompt):
        bad = [x for x in prompt if not 0 <= x < model.vocab_size]
        if bad:
            raise ConfigError(f"token id(s) {bad[:5]} outside the vocabulary [0, {model.vocab_size})")
        ids = prompt
    else:
        raise ConfigError("'prompt' must be a string or a list of token ids")
    if not ids and model.bos_id is None:
        raise ConfigError("the prompt is empty and the model has no bos_id to start from")
    return ids


def _peek_id(text: str | bytes) -> object:
    try:
        obj = _load(text)
    except LineError:
        return None
    return obj.get("id") if isinstance(obj, dict) else None


_BOM = "\ufeff"


def jsonl_lines(path: str | Path | BinaryIO, what: str = "input") -> Iterator[bytes | LineError]:
    """The lines of a JSON-lines file for :func:`generate_jsonl`, read one at a time (never the
    whole file), as bytes: each is decoded on its own, so one bad byte fails one line. A line
    longer than :data:`MAX_LINE_BYTES` (64 MiB) comes as a :class:`LineError` (its error record).

    ``path`` may be a regular file or a pipe (``<(...)``); it is opened here, so that a directory,
    a device, a missing or unreadable file fails (DecodekitError, naming ``what``) before
    anything is written. A read error later raises DecodekitError too. ``path`` may also be an
    open binary stream (``sys.stdin.buffer``: ``--input -``), whatever it reads from (an empty
    one, ``/dev/null``, has no lines); it is read from where it stands and not closed."""
    if hasattr(path, "read"):
        name = "-" if path is getattr(sys.stdin, "buffer", None) else getattr(path, "name", "(a stream)")
        return _lines(path, name, what, close=False)
    try:
        st = os.stat(path)
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISFIFO(st.st_mode)):
            raise DecodekitError(f"{what} {path} is not a regular file or a pipe")
        f = open(path, "rb")  # noqa: SIM115 (closed by the generator)
    except OSError as e:
        raise DecodekitError(f"cannot read {what} {path}: {e.strerror or e}") from None
    return _lines(f, path, what)


def _lines(f: BinaryIO, path: object, what: str, close: bool = True) -> Iterator[bytes | LineError]:
    try:
        for line in bounded_lines(f, MAX_LINE_BYTES):
            yield line if line is not None else LineError(f"line longer than {MAX_LINE_BYTES:,} bytes")
    except OSError as e:
        raise DecodekitError(f"cannot read {what} {path}: {e.strerror or e}") from None
    finally:
        if close:
            f.close()


def generate_jsonl(
    model: LanguageModel,
    lines: Iterable[str | bytes],
    output: str | Path | None,
    defaults: GenerationConfig | None = None,
    *,
    batch_size: int = 16,
    resume: bool = False,
    progress: Callable[[int], None] | None = None,
    max_memory: int | str | None = None,
) -> dict:
    """Decode every JSON line of ``lines`` (str or bytes) into ``output`` (see the module docstring).
    ``lines`` is read once, a line at a time (:func:`jsonl_lines` reads a file so); a UTF-8 byte
    order mark before the first line is ignored; a :class:`LineError` item is that line's error.
    Under torchrun every rank passes the same lines and the same ``output``; each decodes its share
    (:func:`share`), and the process group is joined here if it is not yet (and then left).

    Args:
        progress: called with the number of records this process finished after each write.
        max_memory: the memory a search may use (see :mod:`decodekit.decoding.memory`).

    ``output`` may be a symlink (its target is written and locked) and must be a regular file or
    not exist: anything else (``/dev/null``, a FIFO) raises :class:`DecodekitError` and is left as
    it is. It is locked while the run lasts (:mod:`decodekit.util.locking`). Returns counts
    ``{"written", "skipped", "errors", "duplicates"}`` and ``first_error`` ("line N: ...", or None);
    under torchrun ``written``, ``skipped`` and ``errors`` are the whole run's on rank 0 (``skipped``
    and ``errors`` on every rank), the others this rank's.
    """
    if batch_size < 1:
        raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
    defaults = defaults or GenerationConfig()
    job = _Job(model, defaults, batch_size, progress, max_memory)
    rank, size = distributed.world()
    if output is None:  # standard output, as `llm` and jq pipelines read it
        if resume or size > 1:
            raise ConfigError(
                "resuming needs an output file (--output FILE): standard output keeps no records to skip"
                if resume
                else "several torchrun processes cannot share standard output: give --output FILE"
            )
        run = _Run(model, _StandardOutput(), batch_size, progress, max_memory)
        run.read(lines, defaults, set(), None)
        return run.counts | {"first_error": run.first_error}
    if size == 1:
        return job.write(lines, output, resume=resume)
    joined = distributed.joined()
    distributed.init(getattr(model, "device", None))
    try:
        return _ranked(job, lines, output, resume, rank, size)
    finally:
        if not joined:  # a group the caller set up stays up
            distributed.shutdown()


class _StandardOutput:
    """Where records go without an output file: standard output's bytes, flushed per batch (a
    pipe is not synced to disk)."""

    durable = False
    name = "<stdout>"

    def write(self, data) -> int:
        return sys.stdout.buffer.write(data)

    def flush(self) -> None:
        sys.stdout.buffer.flush()


def share(rank: int, size: int) -> Callable[[int], bool]:
    """Whether rank ``rank`` of ``size`` decodes line ``n`` (1-based): every size-th line."""
    return lambda n: (n - 1) % size == rank


def _ranked(job: _Job, lines, output: str | Path, resume: bool, rank: int, size: int) -> dict:
    """The torchrun protocol: rank 0 locks and prepares ``output`` (a failure is broadcast), each
    rank writes its part file (a rank's failure is told to all), rank 0 merges the parts (after a
    barrier)."""
    parts = [part_path(output, r) for r in range(size)]
    with contextlib.ExitStack() as stack:
        error: BaseException | None = None
        if rank == 0:  # rank 0 holds the output's lock for the whole run
            try:
                stack.enter_context(exclusive(results.target(output), "output"))
                results.prepare(output, resume=resume, parts=parts)
            except (DecodekitError, OSError) as e:  # LockedError, a refused path, a full disk
                error = e
        if distributed.broadcast_int(error is not None):
            if error is not None:
                raise error
            raise OtherRankError("rank 0 could not start the run; it says why")
        try:
            counts = job.write(lines, parts[rank], keep=share(rank, size), skip_ids=results.done_ids(output))
        except (DecodekitError, OSError) as e:  # its part refused, a full disk: no rank waits on it
            error, counts = e, {}
        if distributed.all_sum(error is not None):  # also a barrier: every part is written
            if error is not None:
                raise error
            raise OtherRankError("another rank failed; it says why (the parts written are kept for resume)")
        counts["skipped"] = distributed.all_sum(counts["skipped"])
        if rank == 0:
            counts |= results.merge(output, parts)  # the totals of all ranks
        counts["errors"] = distributed.broadcast_int(counts["errors"])
    return counts


def count_prompts(path: str | Path) -> int | None:
    """How many lines of the JSON-lines file ``path`` this process decodes (its share under
    torchrun), blank lines left out: a first pass over a regular file; None for a pipe (which can be
    read only once)."""
    if not stat.S_ISREG(os.stat(path).st_mode):
        return None
    keep = share(*distributed.world())
    mine = (x for n, x in enumerate(jsonl_lines(path), 1) if keep(n))
    return sum(1 for x in mine if not isinstance(x, bytes) or x.removeprefix(_BOM.encode()).strip())


@dataclass(frozen=True)
class _Job:
    """What every write of one job shares: the model and the run's options."""

    model: LanguageModel
    defaults: GenerationConfig
    batch_size: int
    progress: Callable[[int], None] | None
    max_memory: int | str | None

    def write(self, lines, output, *, resume: bool = False, keep=None, skip_ids: set | None = None) -> dict:
        """Decode ``lines`` (those ``keep`` selects) into ``output`` under its lock."""
        output = results.target(output)
        with exclusive(output, "output"):
            done = results.prepare(output, resume=resume) | (skip_ids or set())
            with results.open_results(output) as handle:
                run = _Run(self.model, handle, self.batch_size, self.progress, self.max_memory)
                run.read(lines, self.defaults, done, keep)
        if run.counts["duplicates"]:
            warnings.warn(
                f"{run.counts['duplicates']} line(s) repeat an earlier line's id ({run.first_duplicate}); "
                "each got an error record",
                stacklevel=3,
            )
        return run.counts | {"first_error": run.first_error}


class _Run:
    """One pass over the input: parsing, grouping by options, decoding, writing."""

    def __init__(self, model, handle, batch_size: int, progress, max_memory) -> None:
        self.model, self.handle, self.batch_size = model, handle, batch_size
        self.progress, self.max_memory = progress, max_memory
        self.vocab = getattr(model, "vocab", None)
        self.counts = {"written": 0, "skipped": 0, "errors": 0, "duplicates": 0}
        self.first_error: str | None = None
        self.first_duplicate = ""
        self.pending: dict[GenerationConfig, list[_Record]] = {}

    def read(self, lines, defaults: GenerationConfig, done: set[str], keep) -> None:
        seen: dict[str, int] = {}  # id -> the line that used it first
        for number, text in enumerate(lines, start=1):
            mine = keep is None or keep(number)
            if isinstance(text, LineError):
                if mine:
                    self.error(number, None, str(text))
                continue
            if number == 1:  # utf-8-sig: a byte order mark is no part of the first line
                text = text.removeprefix(_BOM) if isinstance(text, str) else text.removeprefix(_BOM.encode())
            if not text.strip():
                continue
            if not mine:  # another rank's line: its id still makes a later line with it a duplicate
                rid = _peek_id(text)
                if rid is not None:
                    seen.setdefault(results.id_key(rid), number)
                continue
            try:
                record = parse_line(self.model, number, text, defaults)
            except LineError as e:
                rid = e.id if e.id is not None else _peek_id(text)
                if rid is not None and self._repeated(rid, number, seen, done):
                    continue
                self.error(number, rid, str(e))
                continue
            if self._repeated(record.id, number, seen, done):
                continue
            try:  # a search that cannot fit even alone is this line's error, not the batch's
                check_memory(self.model, [record.prompt], record.config, limit=self.max_memory)
            except ValueError as e:
                self.error(number, record.id, str(e))
                continue
            batch = self.pending.setdefault(record.config, [])
            batch.append(record)
            if len(batch) >= self.batch_size:
                self.flush(record.config)
        for config in list(self.pending):
            self.flush(config)

    def _repeated(self, rid: object, number: int, seen: dict[str, int], done: set[str]) -> bool:
        """True if the line is handled already: its id repeats an earlier line's (an error
        record is written) or has a result (skipped)."""
        key = results.id_key(rid)
        if key in seen:
            self.counts["duplicates"] += 1
            self.first_duplicate = self.first_duplicate or f"id {key} on lines {seen[key]} and {number}"
            self.error(number, rid, f"duplicate id: line {seen[key]} has the same id")
            return True
        seen[key] = number
        if key in done:
            self.counts["skipped"] += 1
            return True
        return False

    def error(self, number: int, rid: object, message: str) -> None:
        self.counts["errors"] += 1
        self.first_error = self.first_error or f"line {number}: {message}"
        self.emit([{"id": rid, "line": number, "error": message}])

    def emit(self, records: list[dict]) -> None:
        results.append(self.handle, records)
        if self.progress is not None:
            self.progress(len(records))

    def flush(self, config: GenerationConfig) -> None:
        batch = self.pending.pop(config)
        if "seed" in config.search.reads and config.seed is not None:
            for r in batch:  # one generator per record: results independent of batching
                self.decode([r], config.replace(seed=record_seed(config.seed, r.key)))
            return
        while batch:
            size = self._fitting(batch, config)
            self.decode(batch[:size], config)
            batch = batch[size:]

    def _fitting(self, batch: list[_Record], config: GenerationConfig) -> int:
        """The longest prefix of ``batch`` whose search fits in memory (at least 1)."""
        low, high = 1, len(batch)
        while low < high:
            mid = (low + high + 1) // 2
            try:
                check_memory(self.model, [r.prompt for r in batch[:mid]], config, limit=self.max_memory)
                low = mid
            except ValueError:
                high = mid - 1
        return low

    def decode(self, batch: list[_Record], config: GenerationConfig) -> None:
        try:
            hyps = generate(self.model, [r.prompt for r in batch], config, max_memory=self.max_memory)
        except Exception as e:  # noqa: BLE001 -- whatever the model raises is this line's error, not the job's
            if len(batch) > 1:  # find the line(s) at fault: each alone
                for r in batch:
                    self.decode([r], config)
                return
            self.error(batch[0].line, batch[0].id, _message(e))
            return
        out = []
        for r, h in zip(batch, hyps):
            record = {"id": r.id, "prompt": r.given, "hypotheses": [x.to_dict(self.vocab) for x in h]}
            if config.constrained and not h:
                record["matched"] = False
            out.append(record)
        self.counts["written"] += len(out)
        self.emit(out)


def _message(e: BaseException) -> str:
    lines = str(e).strip().splitlines() or [type(e).__name__]
    prefix = "" if isinstance(e, ValueError) else f"{type(e).__name__}: "
    return prefix + lines[0][:500]


def part_path(output: str | Path, rank: int) -> Path:
    """Where rank ``rank`` writes its share of a distributed run."""
    output = Path(output)
    return output.with_name(f"{output.name}.rank{rank}")
