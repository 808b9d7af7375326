"""Stack-augmented RNN language models (DuSell & Chiang 2020, 2022): one LSTM controller, four
stacks. See docs/stack_rnns.md."""

from decodekit.models.stack.nondeterministic import NondeterministicStack
from decodekit.models.stack.rnn import STACKS, StackLSTM, StackLSTMConfig, build_stack
from decodekit.models.stack.stratification import StratificationStack
from decodekit.models.stack.superposition import SuperpositionStack

__all__ = [
    "STACKS",
    "NondeterministicStack",
    "StackLSTM",
    "StackLSTMConfig",
    "StratificationStack",
    "SuperpositionStack",
    "build_stack",
]
