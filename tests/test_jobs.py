"""generate_jsonl under torchrun, called from Python: the ranks split the lines, and the one output
equals one process's (records, resume, error records). The world is two threads here, with the
collectives of decodekit.distributed played by a barrier (tests/test_batch.py runs real torchrun)."""

import json
import threading

import pytest

import decodekit.jobs as jobs
from decodekit import GenerationConfig, generate_jsonl
from decodekit.errors import DecodekitError
from tests.support.fakes import HistoryLM, word_vocab

WORDS = ["the", "company", "said", "profit", "rose"]
CONFIG = GenerationConfig(max_length=3)
pytestmark = pytest.mark.filterwarnings("ignore:. line.s. repeat an earlier line's id")


class ThreadWorld:
    """decodekit.distributed for ``size`` threads: each thread's rank, collectives over a barrier."""

    def __init__(self, size: int) -> None:
        self.size, self.local = size, threading.local()
        self.barrier = threading.Barrier(size, timeout=60)  # a broken protocol fails, never hangs
        self.slots = [0] * size

    def world(self) -> tuple[int, int]:
        return getattr(self.local, "rank", 0), self.size

    def joined(self) -> bool:
        return True  # the caller's group: generate_jsonl must leave it up

    def init(self, device=None) -> tuple[int, int]:
        return self.world()

    def shutdown(self) -> None:
        raise AssertionError("generate_jsonl left a process group it did not join")

    def _gather(self, value: int) -> list[int]:
        self.slots[self.world()[0]] = value
        self.barrier.wait()
        got = list(self.slots)
        self.barrier.wait()  # nobody writes a slot before every rank has read them
        return got

    def broadcast_int(self, value: int) -> int:
        return self._gather(value)[0]

    def all_sum(self, value: int) -> int:
        return sum(self._gather(value))


def on_ranks(monkeypatch, size: int, call) -> list:
    """``call()`` on every rank of a ThreadWorld: each rank's return value or exception."""
    world = ThreadWorld(size)
    out: list = [None] * size

    def rank(r: int) -> None:
        world.local.rank = r
        try:
            out[r] = call()
        except Exception as e:  # noqa: BLE001 -- compared by the test
            out[r] = e

    with monkeypatch.context() as patch:  # the test's own calls run in one process again
        patch.setattr(jobs, "distributed", world)
        threads = [threading.Thread(target=rank, args=(r,)) for r in range(size)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    return out


@pytest.fixture
def model():
    return HistoryLM(len(WORDS) + 2, seed=3, bos_id=1, eos_id=1, vocab=word_vocab(WORDS))


def lines() -> list[str]:
    good = [json.dumps({"id": i, "prompt": " ".join(WORDS[: 1 + i % 4])}) for i in range(7)]
    twice = [json.dumps({"id": i, "prompt": "the"}) for i in (2, 0)]  # lines 1 and 10: two ranks
    return [*good[:3], "{not json", *good[3:], *twice]


def by_id(path) -> list[dict]:
    records = [json.loads(x) for x in path.read_text().splitlines()]
    return sorted(records, key=lambda r: (json.dumps(r.get("id")), r.get("line", 0)))


def test_two_ranks_write_what_one_process_writes(model, tmp_path, monkeypatch):
    one = generate_jsonl(model, lines(), tmp_path / "one.jsonl", CONFIG, batch_size=2)
    out = tmp_path / "two.jsonl"
    got = on_ranks(monkeypatch, 2, lambda: generate_jsonl(model, lines(), out, CONFIG, batch_size=2))
    assert not any(isinstance(g, BaseException) for g in got), got
    assert by_id(out) == by_id(tmp_path / "one.jsonl")
    assert got[0]["written"] == one["written"] == 7
    assert [g["errors"] for g in got] == [one["errors"]] * 2 == [3, 3]  # the bad line and the duplicates
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.jsonl", "two.jsonl"]  # no part, no lock


def test_two_ranks_resume_a_one_process_run(model, tmp_path, monkeypatch):
    out = tmp_path / "out.jsonl"
    generate_jsonl(model, lines()[:4], out, CONFIG)  # ids 0-2 done, line 4 an error record
    got = on_ranks(monkeypatch, 2, lambda: generate_jsonl(model, lines(), out, CONFIG, resume=True))
    assert not any(isinstance(g, BaseException) for g in got), got
    assert [g["skipped"] for g in got] == [3, 3]
    assert got[0]["written"] == 4
    generate_jsonl(model, lines(), tmp_path / "fresh.jsonl", CONFIG)
    assert by_id(out) == by_id(tmp_path / "fresh.jsonl")


def test_rank_0_failing_to_start_stops_every_rank(model, tmp_path, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()  # not a file: rank 0 refuses it before anything is written
    got = on_ranks(monkeypatch, 2, lambda: generate_jsonl(model, lines(), out, CONFIG))
    assert isinstance(got[0], DecodekitError) and "is a directory, not a regular file" in str(got[0])
    assert isinstance(got[1], jobs.OtherRankError)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"] and not list(out.iterdir())


def test_a_rank_failing_to_write_its_part_stops_every_rank_and_resume_finishes(model, tmp_path, monkeypatch):
    out = tmp_path / "out.jsonl"
    jobs.part_path(out, 1).mkdir()  # rank 1's part cannot be written
    got = on_ranks(monkeypatch, 2, lambda: generate_jsonl(model, lines(), out, CONFIG))
    assert isinstance(got[1], DecodekitError) and "is a directory, not a regular file" in str(got[1])
    assert isinstance(got[0], jobs.OtherRankError)  # not waiting on rank 1 forever
    jobs.part_path(out, 1).rmdir()
    got = on_ranks(monkeypatch, 2, lambda: generate_jsonl(model, lines(), out, CONFIG, resume=True))
    assert got[0]["skipped"] == 4  # rank 0 wrote its part in the failed run: ids 0, 2, 3, 5
    generate_jsonl(model, lines(), tmp_path / "one.jsonl", CONFIG)
    assert by_id(out) == by_id(tmp_path / "one.jsonl")
