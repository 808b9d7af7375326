"""Per-token log-probabilities (Hypothesis.token_logprobs) and the drawing of a search (SearchTree)."""

import json
import math
import re

import pytest
import torch

import decodekit
from decodekit.decoding import SearchTree
from decodekit.decoding.generation import GenerationConfig, generate
from tests.support.fakes import HistoryLM, char_vocab

VOCAB = char_vocab("abc")  # <unk> 0, <eos> 1, a b c


def model(eos=True, seed=3):
    return HistoryLM(5, seed=seed, bos_id=0, eos_id=1 if eos else None, sharpness=1.0, vocab=VOCAB)


def rescored(lm, prompt, tokens):
    """The model's log-probability of each token after ``prompt``, one row, step by step."""
    state, out = lm.initial_state(1), []
    lp = None
    for x in [lm.bos_id, *prompt]:
        lp, state = lm.step(state, torch.tensor([x]))
    for x in tokens:
        out.append(float(lp[0, x]))
        lp, state = lm.step(state, torch.tensor([x]))
    return out


SEARCHES = {
    "greedy": lambda m, p: decodekit.greedy(m, p, 6),
    "sample": lambda m, p: decodekit.sample(m, p, 6, generator=1, num_samples=3),
    "beam": lambda m, p: decodekit.beam_search(m, p, 3, 6, n_best=3),
    "masked": lambda m, p: decodekit.beam_search(m, p, 3, 6, n_best=2, constraint="(ab|c)+"),
    "anderson": lambda m, p: decodekit.constrained_beam_search(m, p, "(ab|c)+", 2, 6, n_best=2),
}


@pytest.mark.parametrize("eos", [True, False])
@pytest.mark.parametrize("search", sorted(SEARCHES))
def test_token_logprobs_are_the_models_and_sum_to_logprob(search, eos):
    lm = model(eos)
    hyps = SEARCHES[search](lm, [[2], [3, 4]])
    assert any(hyps)
    for prompt, found in zip([[2], [3, 4]], hyps):
        for h in found:
            ids = [*h.tokens, 1] if h.finished else list(h.tokens)
            assert len(h.token_logprobs) == len(ids)
            assert h.token_logprobs == pytest.approx(rescored(lm, prompt, ids), abs=1e-5)
            assert math.fsum(h.token_logprobs) == pytest.approx(h.logprob, abs=1e-9)


def test_to_dict_keeps_its_keys_and_adds_token_logprobs_and_texts():
    h = decodekit.beam_search(model(), [2], 3, 6)[0]
    d = h.to_dict(VOCAB)
    assert {"text", "tokens", "logprob", "score", "finished"} <= set(d) and d["tokens"] == list(h.tokens)
    assert d["token_logprobs"] == list(h.token_logprobs)
    assert d["token_texts"] == [VOCAB.tokens[i] for i in h.tokens] + (["<eos>"] if h.finished else [])
    json.dumps(d)


def parse(dot):
    """(nodes {name: label}, edges [(a, b, bold)]) of what SearchTree.to_dot writes."""
    nodes = dict(re.findall(r'^\s*(\w+) \[label="((?:[^"\\]|\\.)*)"', dot, re.M))
    edges = [(a, b, bool(w)) for a, b, w in re.findall(r"^\s*(\w+) -> (\w+)( \[penwidth=3\])?;", dot, re.M)]
    return nodes, edges


def check_drawing(tree, dot, prompt, winner):
    assert dot.startswith("digraph") and dot.count("{") == dot.count("}")
    nodes, edges = parse(dot)
    kept = sum(
        1
        for t in range(len(tree.tokens))
        for i, v in enumerate(tree.logprobs[t])
        if tree.prompts[t][i] == prompt and v > -math.inf
    )
    assert sum(n.startswith("n") for n in nodes) == kept  # one node per kept row
    assert all(a in nodes and b in nodes for a, b, _ in edges)
    bold = {a: b for a, b, is_bold in edges if is_bold}
    path, node = [], "root"
    while node in bold:
        node = bold[node]
        path.append(nodes[node].split("\\n")[0])
    ids = [*winner.tokens, VOCAB.eos_id] if winner.finished else list(winner.tokens)
    assert path == [VOCAB.tokens[i] for i in ids]


@pytest.mark.parametrize("eos", [True, False])
def test_beam_tree_draws_every_kept_row_and_the_winners_path(eos):
    tree = SearchTree()
    hyps = decodekit.beam_search(model(eos), [[2], [3]], 3, 5, n_best=2, record=tree)
    for b in range(2):
        dot = tree.to_dot(VOCAB, prompt=b)
        check_drawing(tree, dot, b, hyps[b][0])
        assert "cluster" not in dot and bool(re.search(r"^\s*e\d+ \[", dot, re.M)) == eos


def test_anderson_draws_per_state_beams():
    tree = SearchTree()
    best = decodekit.constrained_beam_search(model(), [2], "(ab|c)+", 2, 6, record=tree)[0]
    dot = tree.to_dot(VOCAB)
    check_drawing(tree, dot, 0, best)
    drawn = {int(q) for q in re.findall(r"subgraph cluster_state_(\d+)", dot)}
    kept = {q for qs, vs in zip(tree.states, tree.logprobs) for q, v in zip(qs, vs) if v > -math.inf}
    assert drawn == kept and len(drawn) > 1  # one cluster per automaton state a kept row is in
    assert VOCAB.decode(best.tokens) and re.fullmatch("(ab|c)+", VOCAB.decode(best.tokens))


def test_greedy_and_generate_record_a_chain():
    tree = SearchTree()
    config = GenerationConfig(strategy="greedy", max_length=5)
    hyp = generate(model(), [[2]], config, record=tree)[0][0]
    check_drawing(tree, tree.to_dot(VOCAB), 0, hyp)
    assert "root" in tree.to_dot()  # without a vocabulary: token ids
