"""Training throughput (tokens/s) of decodekit's LSTM trainer against a plain reference loop
written the way PyTorch's word_language_model example writes it (seq-first [T, B] batches,
``repackage_hidden``, log_softmax + NLLLoss over [T*B, V], clip_grad_norm_, manual SGD step).

Same sizes (Zaremba small: 2x200 LSTM, 10k vocabulary, batch 20, bptt 20), same data (PTB),
same thread count. The loops alternate ``--rounds`` times, each measurement in a fresh process
after a warm-up, so that load from other users of the machine affects all alike. decodekit's
trainer turns on malloc reuse (``decodekit.training.allocator``); the reference is measured
as the example runs (system malloc) and, for the loops' own cost, with the same setting.
Prints a table with the median tokens/s and the ratios.

    python benchmarks/bench_train_throughput.py --data ../shared/data --updates 150 --rounds 3 --threads 1
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from decodekit.data import batchify, load_corpus
from decodekit.models.registry import create_model, make_config
from decodekit.training import TrainConfig, train
from decodekit.training.allocator import reuse_freed_memory


class ReferenceLSTM(nn.Module):
    """pytorch/examples word_language_model/model.py RNNModel('LSTM'), without dropout."""

    def __init__(self, ntoken: int, ninp: int, nhid: int, nlayers: int) -> None:
        super().__init__()
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers)
        self.decoder = nn.Linear(nhid, ntoken)
        self.nlayers, self.nhid, self.ntoken = nlayers, nhid, ntoken
        for p in self.parameters():
            nn.init.uniform_(p, -0.1, 0.1)

    def forward(self, inp, hidden):
        output, hidden = self.rnn(self.encoder(inp), hidden)
        return F.log_softmax(self.decoder(output).view(-1, self.ntoken), dim=1), hidden

    def init_hidden(self, bsz: int):
        w = next(self.parameters())
        return (w.new_zeros(self.nlayers, bsz, self.nhid), w.new_zeros(self.nlayers, bsz, self.nhid))


def reference_loop(ids: torch.Tensor, ntoken: int, updates: int, bsz: int = 20, bptt: int = 20) -> float:
    """The example's train() (main.py), for ``updates`` updates. Returns tokens/s."""
    torch.manual_seed(0)
    model = ReferenceLSTM(ntoken, 200, 200, 2)
    nbatch = ids.size(0) // bsz
    data = ids[: nbatch * bsz].view(bsz, -1).t().contiguous()  # batchify: [L, B]
    criterion, lr = nn.NLLLoss(), 1.0
    hidden = model.init_hidden(bsz)
    t0 = time.perf_counter()
    for batch, i in enumerate(range(0, data.size(0) - 1, bptt)):
        if batch == updates:
            break
        seq_len = min(bptt, len(data) - 1 - i)
        x, y = data[i : i + seq_len], data[i + 1 : i + 1 + seq_len].reshape(-1)
        model.zero_grad()
        hidden = tuple(h.detach() for h in hidden)  # repackage_hidden
        output, hidden = model(x, hidden)
        loss = criterion(output, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
    return updates * bsz * bptt / (time.perf_counter() - t0)


def decodekit_loop(corpus, updates: int) -> float:
    torch.manual_seed(0)
    model = create_model(make_config("lstm", layers=2, hidden=200, embed=200), corpus.vocab)
    batchify(corpus.train, 20)  # warm the same code path as train()
    t0 = time.perf_counter()
    train(model, corpus, TrainConfig(), progress=False, stop_after_updates=updates)
    return updates * 20 * 20 / (time.perf_counter() - t0)


LOOPS = {
    "reference": "reference (word_language_model)",
    "reference+malloc": "reference, malloc reuse on",
    "decodekit": "decodekit.training.train",
}


def _measure(loop: str, data: str, updates: int, threads: int) -> float:
    """tokens/s of one loop in this (fresh) process, after an untimed warm-up of the same loop."""
    torch.set_num_threads(threads)
    corpus = load_corpus(Path(data) / "ptb")
    if loop == "decodekit":  # train() turns on malloc reuse itself
        decodekit_loop(corpus, 10)
        return decodekit_loop(corpus, updates)
    if loop == "reference+malloc":
        reuse_freed_memory()
    reference_loop(corpus.train, len(corpus.vocab), 10)
    return reference_loop(corpus.train, len(corpus.vocab), updates)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(Path(__file__).resolve().parents[1].parent / "shared" / "data"))
    ap.add_argument("--updates", type=int, default=150, help="updates per measurement")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    runs: dict[str, list[float]] = {loop: [] for loop in LOOPS}
    # Each measurement runs in a fresh process: the C allocator's state (which large blocks it
    # keeps, which it returns to the system and page-faults in again) otherwise carries over from
    # one loop to the next and moves either loop by 10-15% depending on the order.
    ctx = mp.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=ctx, max_tasks_per_child=1) as pool:
        for _ in range(args.rounds):
            for loop in runs:
                runs[loop].append(pool.submit(_measure, loop, args.data, args.updates, args.threads).result())
    print(
        f"LSTM 2x200, PTB, batch 20, bptt 20, {args.threads} thread(s), "
        f"{args.updates} updates x {args.rounds} rounds, each in a fresh process"
    )
    print(f"{'loop':<34}{'tokens/s (median)':>18}{'all rounds':>34}")
    median = {loop: statistics.median(v) for loop, v in runs.items()}
    for loop, label in LOOPS.items():
        print(f"{label:<34}{median[loop]:>18.0f}{str([round(v) for v in runs[loop]]):>34}")
    print(f"ratio decodekit / reference: {median['decodekit'] / median['reference']:.3f}")
    same = median["decodekit"] / median["reference+malloc"]
    print(f"ratio decodekit / reference with malloc reuse: {same:.3f}")


if __name__ == "__main__":
    main()
