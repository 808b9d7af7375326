"""The transformers adapter on a tiny randomly initialised GPT-2 with a byte-level BPE tokenizer
trained in memory (no network, no files): the same tokens as ``generate``, surfaces of byte-level
tokens, regex constraints. (Step/prefill == forward, state purity, reordering and joining states:
tests/models/test_conformance.py.)"""

from __future__ import annotations

import json
import math

import pytest
import regex
import torch

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

import decodekit  # noqa: E402
from decodekit.models.hf import HuggingFaceLM, load_hf  # noqa: E402
from tests.support.fakes import byte_bpe  # noqa: E402

TEXTS = [
    "the cat sat on the mat",
    "the dog ran to the café",
    "a naïve façade in the rain",
    "日本語のテキストです",
    "cats and dogs, 3 of them!",
] * 4


@pytest.fixture(scope="module")
def tiny():
    tok = byte_bpe(TEXTS, 320)
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        vocab_size=len(tok), n_positions=96, n_embd=32, n_layer=2, n_head=2, initializer_range=0.3,
        bos_token_id=0, eos_token_id=0,
    )  # fmt: skip
    model = transformers.GPT2LMHeadModel(config).eval()
    return model, tok


@pytest.mark.parametrize("beams", [1, 3])
def test_same_tokens_as_generate(tiny, beams):
    model, tok = tiny
    lm = HuggingFaceLM(model, tok)
    lm.eos_id = None  # as generate with eos_token_id=None: always max_new_tokens
    prompts = [tok.encode("the cat sat")[:3], tok.encode("a naïve dog")[:3]]
    if beams == 1:
        ours = [h[0].tokens for h in decodekit.greedy(lm, prompts, 12)]
    else:
        ours = [h[0].tokens for h in decodekit.beam_search(lm, prompts, beams, 12, length_penalty=0.0)]
    theirs = model.generate(
        torch.tensor(prompts), max_new_tokens=12, do_sample=False, num_beams=beams, eos_token_id=None,
        pad_token_id=0, attention_mask=torch.ones(2, 3, dtype=torch.long),
    )  # fmt: skip
    assert [list(t) for t in ours] == theirs[:, 3:].tolist()


def test_batch_of_unequal_prompts_equals_one_at_a_time(tiny):
    lm = HuggingFaceLM(*tiny)
    prompts = [[5, 6, 7, 8, 9], [10], [11, 12]]
    batched = decodekit.greedy(lm, prompts, 8)
    for p, got in zip(prompts, batched):
        alone = decodekit.greedy(lm, p, 8)
        assert got[0].tokens == alone[0].tokens
        assert got[0].logprob == pytest.approx(alone[0].logprob, abs=1e-4)


def test_bos_eos_and_vocabulary_size_come_from_the_tokenizer(tiny):
    model, tok = tiny
    lm = HuggingFaceLM(model, tok)
    assert lm.bos_id is None and lm.eos_id == 0 and lm.vocab_size == len(tok)


def test_surfaces_of_byte_level_tokens(tiny):
    model, tok = tiny
    vocab = HuggingFaceLM(model, tok).vocab
    surfaces = vocab.surfaces()
    assert surfaces[0] is None  # <|endoftext|>
    whole = [i for i, s in enumerate(surfaces) if s is not None]
    partial = [i for i, s in enumerate(surfaces) if s is None and i != 0]
    assert partial and any(s.startswith(" ") for s in surfaces if s)
    for i in whole:
        assert tok.decode([i]) == surfaces[i]
    for i in partial:  # a lone part of a multi-byte character: the tokenizer prints U+FFFD
        assert "\ufffd" in tok.decode([i])
    for text in TEXTS[:5] + ["the café", " naïve cats"]:
        ids = tok.encode(text)
        assert vocab.decode(ids) == tok.decode(ids) == text
        if all(surfaces[i] is not None for i in ids):
            assert vocab.separator.join(surfaces[i] for i in ids) == text


def test_regex_constraint_on_a_bpe_vocabulary(tiny):
    model, tok = tiny
    lm = HuggingFaceLM(model, tok)
    pattern = r" [a-z ]*café[a-z ]*"
    prompt = tok.encode("the dog ran to")
    beam = decodekit.constrained_beam_search(lm, prompt, pattern, 3, 10)[0]
    assert regex.fullmatch(pattern, lm.decode(beam.tokens)), lm.decode(beam.tokens)
    masked = decodekit.greedy(lm, prompt, 10, constraint=pattern)[0]  # may stop at max_length
    assert regex.fullmatch(pattern, lm.decode(masked.tokens)), lm.decode(masked.tokens)
    assert "café" not in lm.decode(decodekit.greedy(lm, prompt, 10)[0].tokens)


def test_without_tokenizer_and_load_errors(tiny, tmp_path):
    model, tok = tiny
    lm = HuggingFaceLM(model)
    assert lm.vocab is None and lm.eos_id == 0
    assert len(decodekit.greedy(lm, [5, 6], 4)[0].tokens) <= 4
    with pytest.raises(ValueError, match="has no tokenizer"):
        lm.encode("the cat")
    with pytest.raises(ValueError, match="needs a model with a `vocab`"):
        decodekit.greedy(lm, [5], 4, constraint="a+")
    with pytest.raises(ValueError, match="cannot load a transformers causal LM from .*local files only"):
        load_hf(tmp_path / "missing")
    model.save_pretrained(tmp_path / "m")
    tok.save_pretrained(tmp_path / "m")
    loaded = load_hf(tmp_path / "m")
    assert loaded.vocab.surfaces() == HuggingFaceLM(model, tok).vocab.surfaces()
    ids = torch.tensor([[5, 6, 7]])
    a = loaded.prefill(loaded.initial_state(1), ids)[0]
    assert torch.allclose(a, lm.prefill(lm.initial_state(1), ids)[0], atol=1e-5)


def test_mixture_of_transformers_models_reorders_each_cache(tiny):
    from decodekit.models.mixture import MixtureLM

    model, tok = tiny
    lm = HuggingFaceLM(model, tok)
    torch.manual_seed(1)
    other = transformers.GPT2LMHeadModel(model.config).eval()
    mix = MixtureLM([lm, HuggingFaceLM(other, tok)], [0.6, 0.4])
    prompts = [[5, 6, 7], [8, 9]]
    alone = decodekit.beam_search(MixtureLM([lm]), prompts, 3, 6, length_penalty=0.0)
    direct = decodekit.beam_search(lm, prompts, 3, 6, length_penalty=0.0)
    assert [h[0].tokens for h in alone] == [h[0].tokens for h in direct]
    hyps = decodekit.beam_search(mix, prompts, 3, 6, length_penalty=0.0)
    for p, h in zip(prompts, hyps):  # the reported log-probability is the mixture's, recomputed by hand
        seq = [*p, *h[0].tokens]
        with torch.no_grad():
            la = torch.log_softmax(model(torch.tensor([seq])).logits[0].double(), -1)
            lb = torch.log_softmax(other(torch.tensor([seq])).logits[0].double(), -1)
        mixed = torch.logaddexp(la + math.log(0.6), lb + math.log(0.4))
        total = sum(float(mixed[t - 1, seq[t]]) for t in range(len(p), len(seq)) if seq[t] != lm.eos_id)
        if h[0].finished:
            total += float(mixed[len(seq) - 1, lm.eos_id])
        assert h[0].logprob == pytest.approx(total, abs=1e-3)


# Issue 23.6: a transformers model past its position limit (n_positions)


def _short_context(tiny, positions: int) -> HuggingFaceLM:
    model, tok = tiny
    config = transformers.GPT2Config(**{**model.config.to_dict(), "n_positions": positions})
    short = transformers.GPT2LMHeadModel(config).eval()
    short.load_state_dict(
        {k: v[:positions] if k.endswith("wpe.weight") else v for k, v in model.state_dict().items()}
    )
    return HuggingFaceLM(short, tok)


def _sliding_window(lm: HuggingFaceLM, ids: list[int], window: int, stride: int) -> list[float]:
    """By hand: plain forward passes (no cache, default positions) over windows of ``window``
    inputs every ``stride``; each target scored once, by the first window that holds it last."""
    inputs = ids[:-1] if lm.bos_id is None else [lm.bos_id, *ids[:-1]]
    targets = ids[1:] if lm.bos_id is None else ids
    out, done = [], 0
    for begin in range(0, len(inputs), stride):
        end = min(begin + window, len(inputs))
        with torch.no_grad():
            logits = lm.model(torch.tensor([inputs[begin:end]])).logits[0].double()
        logprobs = torch.log_softmax(logits, -1)
        out += [float(logprobs[t - begin, targets[t]]) for t in range(done, end)]
        done = end
        if end == len(inputs):
            break
    return out


@pytest.mark.parametrize("stride", [None, 16, 5, 1])
def test_perplexity_past_the_position_limit_in_windows(tiny, stride):
    from decodekit.models.scoring import stream_logprobs
    from decodekit.training import evaluate

    lm = _short_context(tiny, 16)
    ids = lm.encode(" ".join(TEXTS[:8]))
    assert len(ids) > 3 * 16 and lm.max_positions == 16
    lm.stride = stride
    got = stream_logprobs(lm, ids)
    want = _sliding_window(lm, ids, 16, 8 if stride is None else stride)
    assert got.shape == (len(ids) - (lm.bos_id is None),) and len(want) == got.numel()
    assert got.double().tolist() == pytest.approx(want, abs=1e-4)
    assert evaluate(lm, ids).ppl == pytest.approx(math.exp(-sum(want) / len(want)), rel=1e-5)
    fits = ids[:12]  # within the limit: one state carried through, as before
    assert stream_logprobs(lm, fits).double().tolist() == pytest.approx(
        _sliding_window(lm, fits, 16, 8), abs=1e-4
    )
    lm.stride = 17
    with pytest.raises(ValueError, match=r"stride must be in \[1, 16\]"):
        stream_logprobs(lm, ids)


def test_generating_past_the_position_limit_names_it(tiny):
    lm = _short_context(tiny, 16)
    prompt = lm.encode("the cat sat on the mat")[:6]
    with pytest.raises(
        ValueError, match=r"^prompt \+ max_length = 6 \+ 20 = 26 tokens, the model's limit is 16; "
    ):
        decodekit.generate(lm, [prompt], decodekit.GenerationConfig(max_length=20))
    with pytest.raises(ValueError, match=r"^17 tokens in one sequence .*the model's limit is 16 positions"):
        decodekit.greedy(lm, prompt, 20)  # the decoders' own path: no IndexError either
    assert len(decodekit.generate(lm, [prompt], decodekit.GenerationConfig(max_length=10))[0][0].tokens) <= 10


def _cli(args, capsys):
    from decodekit.cli import main

    capsys.readouterr()
    try:
        main(args)
    except SystemExit as e:
        return e.code, capsys.readouterr()
    return 0, capsys.readouterr()


def test_cli_eval_and_generate_past_the_limit_and_a_tokenizer_larger_than_the_model(tmp_path, capsys):
    from tests.support.fakes import byte_bpe, save_tiny_gpt2

    save_tiny_gpt2(tmp_path / "m", TEXTS, 300)  # n_positions 64
    data = tmp_path / "long.txt"
    data.write_text("\n".join(TEXTS[:10]) + "\n")
    code, out = _cli(["eval", "--model", str(tmp_path / "m"), "--data", str(data), "--json"], capsys)
    assert code == 0 and "Traceback" not in out.err, out.err
    assert json.loads(out.out)["tokens"] > 64
    code, out = _cli(["generate", "--model", str(tmp_path / "m"), "the cat", "--max-length", "70"], capsys)
    err = out.err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "tokens, the model's limit is 64" in err[0], out.err
    tok = byte_bpe(TEXTS, 300, bos=False)
    torch.manual_seed(0)
    small = transformers.GPT2Config(vocab_size=260, n_positions=64, n_embd=16, n_layer=1, n_head=2)
    transformers.GPT2LMHeadModel(small).save_pretrained(tmp_path / "small")
    tok.save_pretrained(tmp_path / "small")
    code, out = _cli(["eval", "--model", str(tmp_path / "small"), "--data", str(data)], capsys)
    err = out.err.strip().splitlines()
    assert code == 2 and len(err) == 1, out.err
    assert (
        err[0].startswith("Error: the tokenizer gives token ")
        and "beyond the model's vocabulary of 260" in err[0]
    )


def test_a_directory_without_tokenizer_files_is_one_line_naming_them(tmp_path, capfd):
    """AutoTokenizer builds an empty tokenizer from config.json alone: eval used to score garbage
    (or print a traceback) and generate said "prompt 0 is empty"."""
    import transformers

    from decodekit.cli import main
    from decodekit.models.hf import load_hf

    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=50, n_positions=16, n_embd=8, n_layer=1, n_head=2)
    transformers.GPT2LMHeadModel(config).save_pretrained(tmp_path / "m")
    (tmp_path / "t.txt").write_text("a b\n", encoding="utf-8")
    capfd.readouterr()  # save_pretrained's own bar
    lm = load_hf(tmp_path / "m")
    assert lm.vocab is None and "holds no tokenizer" in lm.missing_tokenizer
    with pytest.raises(ValueError, match="holds no tokenizer .*tokenizer.json"):
        lm.encode("a")
    text = str(tmp_path / "t.txt")
    for args in (["eval", "--data", text], ["score", text], ["generate", "a"]):
        with pytest.raises(SystemExit) as e:
            main([*args, "--model", str(tmp_path / "m")])
        err = [x for x in capfd.readouterr().err.splitlines() if not x.startswith("[transformers]")]
        assert e.value.code == 2 and len(err) == 1, err
        assert f"{args[0]} needs text in and out, but {tmp_path / 'm'} holds no tokenizer" in err[0]


def test_truncation_fits_a_long_prompt_in_the_window(tiny):
    """Issue 36 item 4: a prompt longer than the window got advice that could not work ("lower
    max_length to 0"); now the advice names truncation, and truncation='left' keeps the prompt's
    last tokens (the same output as giving those tokens), 'right' its first."""
    lm = _short_context(tiny, 16)
    prompt = (lm.encode("the cat sat on the mat ") * 4)[:20]
    with pytest.raises(ValueError, match="truncation='left'") as e:
        decodekit.generate(lm, [prompt], decodekit.GenerationConfig(max_length=4))
    assert "lower max_length to 0" not in str(e.value)
    room = 16 - 4 - (lm.bos_id is not None)
    left = decodekit.generate(lm, [prompt], max_length=4, truncation="left")[0][0]
    assert left.tokens == decodekit.generate(lm, [prompt[-room:]], max_length=4)[0][0].tokens
    right = decodekit.generate(lm, [prompt], max_length=4, truncation="right")[0][0]
    assert right.tokens == decodekit.generate(lm, [prompt[:room]], max_length=4)[0][0].tokens


def test_a_prompt_past_the_tokenizers_length_leaks_no_transformers_warning(tiny):
    """decodekit reports a prompt past the window itself (truncation= or one line); the
    tokenizer's own "Token indices sequence length is longer than ..." stays quiet."""
    import logging

    model, tok = tiny
    lm = HuggingFaceLM(model, tok)
    said = []
    handler = logging.Handler()
    handler.emit = lambda record: said.append(record.getMessage())
    logging.getLogger("transformers").addHandler(handler)
    saved = tok.model_max_length
    tok.model_max_length = 4
    try:
        assert len(lm.encode("the cat sat on the mat and the dog sat on the log")) > 4
    finally:
        tok.model_max_length = saved
        logging.getLogger("transformers").removeHandler(handler)
    assert not [m for m in said if "sequence length" in m], said


def test_the_prepared_vocabulary_is_made_once_per_tokenizer_and_again_when_it_changes():
    """A processor made per ``generate`` call reads the tokenizer's 50,000 token bytes once, not
    each time; a token added to the tokenizer is seen."""
    from decodekit.logits_processor import ConstraintLogitsProcessor
    from decodekit.models.hf import prepared_vocab

    tok = byte_bpe(TEXTS, 300, bos=False)
    first = prepared_vocab(tok, len(tok))
    assert prepared_vocab(tok, len(tok)) is first
    assert prepared_vocab(tok, len(tok) + 8) is not first  # another width: its own
    assert ConstraintLogitsProcessor("[a-z]+", tok).automaton.vocab_size == len(tok)
    assert prepared_vocab(tok, len(tok)) is first  # the processor took the kept one
    tok.add_tokens(["<new>"])
    again = prepared_vocab(tok, len(tok))
    assert again is not first and len(again) == len(first) + 1
