"""The derivative engine's length check near ``max_length`` (tokens/derived.py): the shortest
accepted text of a state (``witness``), the fewest tokens spelling it (an upper bound on the
fewest tokens to acceptance), and the masks they decide. Oracles: ``regex.fullmatch`` of the
text read so far plus the witness, brute-force segmentation of a text into tokens, and the whole
automaton's exact fewest tokens and masks (``compile_regex(..., lazy=False)``)."""

from __future__ import annotations

import functools
import random

import pytest
import regex
import torch

from decodekit.constraints import DerivedTokenAutomaton, Pattern, compile_regex
from decodekit.constraints.automata.charlevel import CharLevel
from decodekit.constraints.tokens.trie import encode_vocab
from tests.constraints.test_derivatives import same_masks

ALPHABET = 'abdegimnst{}[]:,"0123456789é中 '
JSON_LIKE = r'\{"id":[0-9]{1,3},"name":"[a-zé]{0,4}","tags":\[(?:"[ab]{1,2}"(?:,"[ab]{1,2}"){0,2})?\]\}'
WORDS = ['{"id":', '{"', '"name":"', ',"name":"', '","tags":["', '"]}', "],", "12", "ab", "é中", "中"]
PATTERNS = [
    JSON_LIKE,
    "(?:ab|é中){3,6}b",
    r"[ab]*a[ab]{4}",
    Pattern("[ab é]{2,9}") & ~Pattern(".*(?:aa|é ).*"),
    Pattern(r".*\bab\b.*") & Pattern("[ab ]{0,9}"),
]


def derived(expr, tokens) -> DerivedTokenAutomaton:
    tokens = tuple(tokens)
    enc = encode_vocab(tokens)
    expr = Pattern(expr) if isinstance(expr, str) else expr
    return DerivedTokenAutomaton(CharLevel(expr, enc.available(b"")), enc, tokens, len(tokens) - 1, str(expr))


def vocabulary() -> list[str]:
    """Every character alone (so the engine is exact), multi-character tokens, EOS last."""
    return list(dict.fromkeys([*ALPHABET, *WORDS])) + ["<eos>"]


def fullmatches(expr, text: str) -> bool:
    if isinstance(expr, str):
        return bool(regex.fullmatch(expr, text))
    if expr.op == "re":
        return bool(regex.fullmatch(expr.args, text))
    if expr.op == "and":
        return all(fullmatches(a, text) for a in expr.args)
    if expr.op == "cat":
        parts = expr.args
        if len(parts) == 1:
            return fullmatches(parts[0], text)
        rest = Pattern("", "cat", parts[1:]) if len(parts) > 2 else parts[1]
        cuts = range(len(text) + 1)
        return any(fullmatches(parts[0], text[:i]) and fullmatches(rest, text[i:]) for i in cuts)
    if expr.op == "or":
        return any(fullmatches(a, text) for a in expr.args)
    assert expr.op == "not"
    return not fullmatches(expr.args[0], text)


def walks(auto, tokens, seed: int, n: int = 6, steps: int = 10):
    """(text so far, byte state) along random walks of allowed tokens."""
    rng = random.Random(seed)
    for _ in range(n):
        s, text = auto.initial, b""
        for _ in range(steps):
            yield text, s
            row = auto.allowed(torch.tensor([s]))[0]
            choices = [t for t in row.nonzero()[:, 0].tolist() if t != auto.eos_id]
            if not choices:
                break
            t = rng.choice(choices)
            s, text = int(auto.step(torch.tensor([s]), torch.tensor([t]))[0]), text + tokens[t].encode()


@pytest.mark.parametrize("expr", PATTERNS, ids=str)
def test_witness_is_a_shortest_accepted_continuation(expr):
    """From every state reached, the witness has the state's fewest bytes to acceptance, leads it
    to acceptance byte by byte, and the text read so far plus it is a match."""
    tokens = vocabulary()
    auto = derived(expr, tokens)
    lb = auto.bytes
    for text, s in walks(auto, tokens, seed=1):
        w = lb.witness(s)
        assert w is not None and len(w) == lb.distance(s)
        x = s
        for b in w:
            x = lb.step(x, b)
            assert x >= 0
        assert lb.accepting(x)
        assert fullmatches(expr, (text + w).decode("utf-8")), (text, w)


def test_witness_inside_a_character_completes_it():
    tokens = [*"ab", *(bytes([b]) for b in "é中".encode()), "<eos>"]
    tokens = [t if isinstance(t, bytes) else t.encode() for t in tokens]
    enc = encode_vocab(tokens)
    auto = DerivedTokenAutomaton(CharLevel(Pattern("a(?:中|é)b"), enc.available(b"")), enc, tokens, 4, "")
    lb = auto.bytes
    s = lb.step(lb.step(0, ord("a")), "中".encode()[0])  # inside 中: two bytes to go, then b
    assert lb.witness(s) == "中".encode()[1:] + b"b" and lb.distance(s) == 3
    assert lb.witness(lb.step(0, ord("a"))) == "éb".encode()  # the shorter character


def _fewest_brute(text: bytes, pieces: set[bytes]) -> int:
    @functools.cache
    def rest(i: int) -> float:
        if i == len(text):
            return 0
        return min((1 + rest(j) for j in range(i + 1, len(text) + 1) if text[i:j] in pieces), default=1e9)

    return int(rest(0))


def test_fewest_tokens_spelling_a_text_is_the_brute_force_segmentation():
    tokens = vocabulary()
    auto = derived(JSON_LIKE, tokens)
    pieces = {t.encode() for t in tokens[:-1]}  # EOS is not usable
    rng = random.Random(0)
    texts = ['{"id":12,"name":"ab","tags":["ab"]}', "é中中ab", ""]
    texts += ["".join(rng.choice([*WORDS, *ALPHABET]) for _ in range(rng.randint(1, 12))) for _ in range(40)]
    for t in texts:
        assert auto._fewest.fewest_tokens(t.encode()) == _fewest_brute(t.encode(), pieces), t


@pytest.mark.parametrize("expr", PATTERNS, ids=str)
def test_upper_bound_lies_between_the_exact_fewest_tokens_and_the_bytes(expr):
    """Along the same token walks, the bound of each state is at least the whole automaton's
    exact fewest tokens and at most the state's fewest bytes; the masks at every budget (the
    bound deciding most of them) are the whole automaton's."""
    tokens = vocabulary()
    eos = len(tokens) - 1
    whole = compile_regex(expr, tokens, eos, lazy=False)
    auto = derived(expr, tokens)
    rng = random.Random(2)
    for _ in range(6):
        e, z = whole.initial, auto.initial
        for _ in range(10):
            exact = int(whole.min_tokens_to_accept[e])
            assert exact <= auto._fewest.upper_bound(z) <= auto.bytes.distance(z)
            row = whole.allowed(torch.tensor([e]))[0]
            choices = [t for t in row.nonzero()[:, 0].tolist() if t != eos]
            if not choices:
                break
            t = rng.choice(choices)
            e, z = int(whole.next_state[e, t]), int(auto.step(torch.tensor([z]), torch.tensor([t]))[0])
    assert auto.shortest == whole.shortest
    same_masks(whole, derived(expr, tokens), walks=6, steps=10, budgets=14, seed=4)


def test_the_first_mask_at_a_short_budget_walks_one_row():
    """Where the spelled shortest texts fit the budget but the fewest bytes do not (the byte
    bounds alone leave every token of the first row undecided), the first mask under
    ``remaining`` walks the initial state's row only: no search over tokens; its row is the
    whole automaton's."""
    tokens = vocabulary()
    auto = derived(JSON_LIKE, tokens)
    remaining = 21
    _, ends, dist = auto._walked(0)
    assert (dist > remaining - 1).all() and (-(-dist // auto._longest) <= remaining - 1).all()
    row = auto.allowed(torch.tensor([0]), remaining)
    assert len(auto._walks) == 1
    whole = compile_regex(JSON_LIKE, tokens, len(tokens) - 1, lazy=False)
    assert torch.equal(row, whole.allowed(torch.tensor([0]), remaining)) and row.any()


def _dijkstra(char: CharLevel, q0: int) -> int:
    """The fewest bytes from q0 to acceptance by a plain search over every class (the oracle)."""
    import heapq

    cost = [n for n in char.alg.class_bytes]
    best, heap = {q0: 0}, [(0, q0)]
    while heap:
        d, q = heapq.heappop(heap)
        if d > best[q]:
            continue
        if char.accepting(q):
            return d
        for k in range(char.num_classes):
            r = char.step(q, k)
            if r >= 0 and cost[k] < (1 << 20) and d + cost[k] < best.get(r, 1 << 60):
                best[r] = d + cost[k]
                heapq.heappush(heap, (d + cost[k], r))
    return -1


NESTED = [
    Pattern("a") + (Pattern("[ab]{1,5}") & ~Pattern(".*bb.*")) + Pattern("(?:é中)?b"),
    (Pattern("[ab]{2,6}") & Pattern(".*a.*a.*")) | Pattern("b{7}"),
    Pattern("x?") + ~Pattern("[ab]*") + Pattern("[ab]"),
    Pattern(r".*\bab\b.*") & Pattern("[ab ]{0,7}"),
]


@pytest.mark.parametrize("expr", NESTED, ids=str)
def test_distances_and_blocks_of_expressions_with_intersections_inside(expr):
    """The fewest bytes read off a concatenation around an intersection (each searched from its
    own state) equal a plain search over every class; the derivative is the same for every class
    of a block; the witness is a match."""
    tokens = vocabulary()
    auto = derived(expr, tokens)
    char = auto.bytes.char
    for text, s in walks(auto, tokens, seed=5, n=4, steps=8):
        q = auto.bytes.keys[s][0]
        if auto.bytes.keys[s][1]:
            continue  # inside a character
        assert char.distance(q) == _dijkstra(char, q)
        e, p = char.states[q]
        for block in char.blocks(e):
            ks = [k for k in range(char.num_classes) if block >> k & 1]
            assert len({char.alg.derivative(e, k, p) for k in ks}) == 1
        w = auto.bytes.witness(s)
        assert w is not None and fullmatches(expr, (text + w).decode("utf-8"))
