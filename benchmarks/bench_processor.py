"""``ConstraintLogitsProcessor`` inside transformers' ``generate`` against xgrammar's processor,
end to end on a tiny random GPT-2 (issue 37: within 1.1x xgrammar's processor; num_beams=4 and a
batch of 8 prompts measured).

The model: a random GPT-2 (1 layer, width 32, seeded) over a 50,000-token byte-level BPE trained
on PTB (``bench_byte_patterns.byte_bpe``, cached). For each pattern and each setting (greedy,
``num_beams=4``), one ``model.generate`` call over a batch of ``--prompts`` prompts, with a
processor made for the call: decodekit's ``ConstraintLogitsProcessor(pattern, tokenizer,
max_new_tokens=...)`` (its compile cached by the compiler after the first call, as in a server)
or xgrammar's (the grammar compiled once beforehand: ``contrib.hf.LogitsProcessor`` for greedy;
for beams a processor forking one ``GrammarMatcher`` per beam prefix, ``bench_structured``'s,
since the contrib one assumes row i continues row i). The same call with no processor is the
model's own cost. CPU seconds per call, median of ``--repeats`` alternated rounds; every
output is checked with ``regex.fullmatch`` where it ended (EOS). Prints a Markdown table.

    python benchmarks/bench_processor.py [--prompts 8] [--new 24] [--repeats 5] [--cache runs/byte-bpe]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import regex
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

PATTERNS = {
    "date": r"[0-9]{4}-[0-9]{2}-[0-9]{2}",
    "email": r"[a-z0-9._]{1,16}@[a-z0-9]{1,12}\.(com|org|net)",
    "profit": r".*\bprofit\b.*",
}


def main() -> None:
    here = Path(__file__).resolve().parents[1]
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=here.parent / "shared" / "data")
    ap.add_argument("--cache", type=Path, default=None, help="the trained BPE's cache folder")
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--new", type=int, default=24, help="max_new_tokens")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--patterns", nargs="+", default=list(PATTERNS))
    args = ap.parse_args()
    torch.set_num_threads(1)

    import transformers
    import xgrammar as xgr
    import xgrammar.contrib.hf as xhf
    from bench_byte_patterns import byte_bpe
    from bench_structured import BeamGrammarProcessor

    from decodekit import ConstraintLogitsProcessor

    raw, tok, tokens, eos = byte_bpe(args.data, 50_000, cache=args.cache, verbose=False)
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        vocab_size=len(tokens),
        n_positions=256,
        n_embd=32,
        n_layer=1,
        n_head=2,
        bos_token_id=eos,
        eos_token_id=eos,
    )
    model = transformers.GPT2LMHeadModel(config).eval()
    info = xgr.TokenizerInfo(
        [t if t is not None else b"" for t in tokens],
        xgr.VocabType.RAW,
        vocab_size=len(tokens),
        stop_token_ids=[eos],
    )
    compiler = xgr.GrammarCompiler(info, max_threads=1)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(1, len(tokens), (args.prompts, 8), generator=g)
    ids[ids == eos] = 1
    mask = torch.ones_like(ids)

    def processors(pattern: str, compiled, beams: int) -> dict:
        """Who -> a function making a fresh processor for one generate call."""

        def xgrammar():
            if beams == 1:
                return xhf.LogitsProcessor(compiled)
            return BeamGrammarProcessor(compiled, ids.shape[1], len(tokens))

        return {
            "none": lambda: None,
            "decodekit": lambda: ConstraintLogitsProcessor(pattern, tok, max_new_tokens=args.new),
            "xgrammar": xgrammar,
        }

    def run(processor, beams: int):
        options = dict(max_new_tokens=args.new, num_beams=beams, do_sample=False, pad_token_id=eos)
        listed = transformers.LogitsProcessorList([processor] if processor is not None else [])
        t = time.process_time()
        out = model.generate(input_ids=ids, attention_mask=mask, logits_processor=listed, **options)
        return time.process_time() - t, out[:, ids.shape[1] :]

    print(
        f"tiny GPT-2, V = {len(tokens):,}, {args.prompts} prompts, max_new_tokens={args.new}, CPU s per call"
    )
    print(f"({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})\n")
    print("| pattern | num_beams | no processor | decodekit | xgrammar | decodekit / xgrammar | matched |")
    print("|---|---|---|---|---|---|---|")
    for name in args.patterns:
        pattern = PATTERNS[name]
        try:
            compiled = compiler.compile_regex(pattern)
        except RuntimeError as e:  # e.g. \b: "Word boundary is not supported yet"
            print(f"| {name} | | | | xgrammar refuses: {str(e).splitlines()[0].split(': ')[-1][:60]} | | |")
            continue
        for beams in (1, 4):
            makers = processors(pattern, compiled, beams)
            times: dict[str, list[float]] = {k: [] for k in makers}
            matched: dict[str, str] = {}
            for _ in range(args.repeats):
                for who, make in makers.items():
                    cpu, out = run(make(), beams)
                    times[who].append(cpu)
                    if who != "none":
                        ended = [row[: (row == eos).nonzero()[0, 0]] for row in out if (row == eos).any()]
                        ok = sum(bool(regex.fullmatch(pattern, tok.decode(r))) for r in ended)
                        matched[who] = f"{ok}/{len(out)}"
            med = {k: statistics.median(v) for k, v in times.items()}
            ratio = med["decodekit"] / med["xgrammar"]
            print(
                f"| {name} | {beams} | {med['none']:.3f} | {med['decodekit']:.3f} | {med['xgrammar']:.3f} "
                f"| **{ratio:.2f}** | {matched['decodekit']} / {matched['xgrammar']} |"
            )


if __name__ == "__main__":
    main()
