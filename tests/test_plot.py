"""decodekit plot: training curves from metrics.jsonl (matplotlib is an optional extra)."""

import json

import pytest

from decodekit.errors import DecodekitError
from decodekit.plotting import plot_runs, read_run


def write_run(path, epochs, test=None):
    path.mkdir(parents=True)
    lines = [
        {"epoch": e, "lr": 1.0 / 2 ** max(0, e - 2), "train_ppl": 300 / e, "valid_ppl": 320 / e**0.5}
        for e in range(1, epochs + 1)
    ]
    if test is not None:
        lines.append({"event": "test", "test_ppl": test})
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    return path


def test_read_run_gives_the_epoch_columns_and_test(tmp_path):
    run = read_run(write_run(tmp_path / "lstm", 3, test=150.5))
    assert run.name == "lstm" and run.epochs == [1, 2, 3] and run.test_ppl == 150.5
    assert run.train_ppl == [300.0, 150.0, 100.0] and run.lr == [1.0, 1.0, 0.5]


@pytest.mark.parametrize("suffix", [".svg", ".png"])
def test_several_runs_on_one_figure(tmp_path, suffix):
    pytest.importorskip("matplotlib", reason="plotting needs the optional matplotlib extra")
    a, b = write_run(tmp_path / "lstm-small", 4, test=114.5), write_run(tmp_path / "rnn-tied", 2)
    out = plot_runs([a, b], tmp_path / f"fig{suffix}")
    data = out.read_bytes()
    assert data.startswith(b"\x89PNG") if suffix == ".png" else b"<svg" in data
    if suffix == ".svg":
        assert b"lstm-small" in data and b"rnn-tied" in data and b"114.50" in data


def test_mistakes_are_decodekit_errors(tmp_path):
    with pytest.raises(DecodekitError, match="metrics.jsonl not found"):
        read_run(tmp_path)
    (tmp_path / "metrics.jsonl").write_text("{not json\n")
    with pytest.raises(DecodekitError, match=":1: not JSON"):
        read_run(tmp_path)
    (tmp_path / "metrics.jsonl").write_text("")
    with pytest.raises(DecodekitError, match="no finished epoch"):
        read_run(tmp_path)
    with pytest.raises(DecodekitError, match=r"\.png"):
        plot_runs([write_run(tmp_path / "r", 1)], tmp_path / "fig.jpg")
