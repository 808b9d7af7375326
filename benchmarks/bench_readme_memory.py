"""Peak memory of the README's constrained command on a tiny GPT-2 (issue 37: under 400 MB).

A random GPT-2 (2 layers, width 64) over a 50,000-token byte-level BPE trained on PTB
(``bench_byte_patterns.byte_bpe``, cached), saved as a transformers model directory; then each
command runs in a fresh process and its peak resident memory (``ru_maxrss`` of the child) is read:

    decodekit generate "the company said" --model DIR                                  (no constraint)
    decodekit generate "the company said" --model DIR --constraint '.*\\bprofit\\b.*'   (the README's)

and the same constrained search with each strategy named; the floor is transformers alone loading
the directory and generating 30 tokens. Prints a Markdown table.

    python benchmarks/bench_readme_memory.py [--data ../shared/data] [--work /tmp/readme-memory]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

README_PATTERN = r".*\bprofit\b.*"
STRATEGIES = ("banked-beam", "masked-beam", "greedy")
TRANSFORMERS_ALONE = """
import sys, transformers
tok = transformers.AutoTokenizer.from_pretrained(sys.argv[1])
model = transformers.AutoModelForCausalLM.from_pretrained(sys.argv[1]).eval()
ids = tok("the company said", return_tensors="pt")
model.generate(**ids, max_new_tokens=30, do_sample=False, pad_token_id=tok.eos_token_id)
"""


def model_dir(data: Path, work: Path, cache: Path | None, layers: int = 2, width: int = 64) -> Path:
    """The tiny GPT-2 directory (built once under ``work``; ``layers`` x ``width``)."""
    import torch
    import transformers
    from bench_byte_patterns import byte_bpe

    out = work / ("tiny-gpt2-50k" if (layers, width) == (2, 64) else f"gpt2-{layers}x{width}-50k")
    if (out / "config.json").exists():
        return out
    _, tok, tokens, eos = byte_bpe(data, 50_000, cache=cache, verbose=False)
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        vocab_size=len(tokens),
        n_positions=256,
        n_embd=width,
        n_layer=layers,
        n_head=2,
        bos_token_id=eos,
        eos_token_id=eos,
    )
    transformers.GPT2LMHeadModel(config).eval().save_pretrained(out)
    tok.save_pretrained(out)
    return out


_MEASURE = """
import resource, subprocess, sys
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
sys.stderr.write(done.stderr[-2000:] if done.returncode else "")
print(usage.ru_maxrss, usage.ru_utime + usage.ru_stime, done.returncode)
"""


def peak_mb(command: list[str]) -> tuple[float, float, int]:
    """(peak RSS MB of the child, CPU seconds of the child, exit code): one fresh process, run by
    a fresh launcher whose only child it is (``RUSAGE_CHILDREN`` keeps the largest child ever
    waited for, so read from this process it would repeat an earlier, larger command's peak)."""
    done = subprocess.run([sys.executable, "-c", _MEASURE, *command], capture_output=True, text=True)
    if done.stderr:
        print(done.stderr[-2000:], file=sys.stderr)
    kib, cpu, code = done.stdout.split()
    return int(kib) / 1024, float(cpu), int(code)


def main() -> None:
    here = Path(__file__).resolve().parents[1]
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=here.parent / "shared" / "data", help="where PTB is")
    parser.add_argument(
        "--work", type=Path, default=Path("/tmp/decodekit-readme-memory"), help="model dir home"
    )
    parser.add_argument("--cache", type=Path, default=None, help="the trained BPE's cache folder")
    args = parser.parse_args()
    directory = model_dir(args.data, args.work, args.cache)
    base = [sys.executable, "-m", "decodekit", "generate", "the company said", "--model", str(directory)]
    runs = [
        ("no constraint (default: greedy)", []),
        ("the README's: --constraint (default strategy)", ["--constraint", README_PATTERN]),
        (
            "--constraint, --strategy banked-beam",
            ["--constraint", README_PATTERN, "--strategy", "banked-beam"],
        ),
        (
            "--constraint, --strategy masked-beam",
            ["--constraint", README_PATTERN, "--strategy", "masked-beam"],
        ),
        ("--constraint, --strategy greedy", ["--constraint", README_PATTERN, "--strategy", "greedy"]),
    ]
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"tiny GPT-2 over a 50,000-token byte-level BPE, {when}\n")
    print("| command | peak RSS MB | CPU s | exit |")
    print("|---|---|---|---|")
    floor = [sys.executable, "-c", TRANSFORMERS_ALONE, str(directory)]
    mb, cpu, code = peak_mb(floor)
    print(f"| transformers alone: load, generate 30 tokens | {mb:.0f} | {cpu:.1f} | {code} |")
    for what, extra in runs:
        mb, cpu, code = peak_mb(base + extra)
        print(f"| {what} | {mb:.0f} | {cpu:.1f} | {code} |")


if __name__ == "__main__":
    main()
