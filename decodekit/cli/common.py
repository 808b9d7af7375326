"""Shared CLI plumbing: one-line errors with exit code 2, one-line warnings, the model and device
options every model-using command shares."""

from __future__ import annotations

import errno
import os
import shlex
import signal
import sys
import warnings
from typing import Any

import click

ARGV: list[str] | None = None  # the arguments of this invocation (set by run_main)


class UsageError(click.ClickException):
    """A user mistake: printed as one line ``Error: ...``, exit code 2."""

    exit_code = 2


def run_main(group: click.Group, argv: list[str] | None) -> None:
    """Run the click group, turning library ``ValueError``s into one-line errors (exit 2)."""
    from decodekit import DecodekitError

    global ARGV
    ARGV = list(sys.argv[1:] if argv is None else argv)
    standard_streams()
    try:
        with warnings.catch_warnings():  # restores the caller's showwarning afterwards
            warnings.showwarning = show_warning
            group.main(args=argv, prog_name="decodekit", standalone_mode=False)
        sys.stdout.flush()  # here, not at exit: a closed pipe is met where it is handled
    except (BrokenPipeError, OutputClosed):
        die_of_sigpipe()
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        sys.exit(130)
    except click.ClickException as e:
        code = 2 if e.exit_code == 1 else e.exit_code
        if _other_rank():  # a mistake in the command line: the same on every rank; rank 0 says it
            sys.exit(code)
        hint = ""
        ctx = getattr(e, "ctx", None)
        if isinstance(e, click.UsageError) and ctx is not None:
            hint = f" (see '{ctx.command_path} --help')"
        click.echo(f"Error: {e.format_message()}{hint}", err=True)
        sys.exit(code)
    except (DecodekitError, ValueError) as e:
        click.echo(f"Error: {e}", err=True)
        sys.exit(2)
    except OSError as e:  # a full or read-only disk, a permission: what failed where, in one line
        click.echo(f"Error: {os_error_message(e)}", err=True)
        sys.exit(2)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except RuntimeError as e:  # under torchrun, another rank gone: one line, not gloo's traceback
        lost = _peer_lost(e)
        if lost is None:
            raise
        click.echo(f"Error: {lost}", err=True)
        sys.exit(2)
    except Exception as e:
        if type(e).__name__ != "SafetensorError":  # safetensors' I/O errors (not imported here)
            raise
        reason = (str(e).strip().splitlines() or ["?"])[0][:300]
        click.echo(f"Error: cannot read or write a safetensors file: {reason}", err=True)
        sys.exit(2)


class OutputClosed(Exception):
    """Standard output (or error) is a pipe whose reader has gone (``decodekit ... | head``):
    raised by :class:`Commands` in place of the ``BrokenPipeError``, which click would turn
    into exit status 1."""


class Commands(click.Group):
    """The ``decodekit`` group: a command that writes to a closed pipe raises
    :class:`OutputClosed`, for :func:`run_main` to end the process as a pipeline expects."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except OSError as e:
            if e.errno != errno.EPIPE:
                raise
            raise OutputClosed() from None


def die_of_sigpipe() -> None:
    """End the process as ``cat`` or ``yes`` end when the reader of their output has gone: killed
    by SIGPIPE (status 141 in a shell), silently. Killed, not exited: nothing more is written
    (Python's flush of the closed pipe at exit would complain) and no finaliser runs (a torch
    thread still running a step would abort the interpreter's exit)."""
    if not hasattr(signal, "SIGPIPE"):  # Windows: no such signal
        os._exit(1)
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGPIPE)
    os._exit(128 + signal.SIGPIPE)  # not reached unless SIGPIPE is blocked


STANDARD = ((0, "stdin", os.O_RDONLY, "r"), (1, "stdout", os.O_WRONLY, "w"), (2, "stderr", os.O_WRONLY, "w"))


def standard_streams() -> None:
    """Make standard input, output and error usable when the command was started with one closed
    (``2>&-``; Python then sets ``sys.stderr`` to None): the closed descriptor is opened on
    ``/dev/null`` (so a file opened later cannot take descriptor 2 and receive messages) and the
    ``sys`` stream is made for it. Messages to a closed stderr are thus dropped, the work done."""
    for fd, name, flags, mode in STANDARD:
        try:
            os.fstat(fd)
        except OSError:
            opened = os.open(os.devnull, flags)
            if opened != fd:  # the lower descriptors are open, so this is not expected
                os.dup2(opened, fd)
                os.close(opened)
        if getattr(sys, name) is None:
            stream = open(fd, mode, encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115
            if mode == "w":
                stream.reconfigure(line_buffering=True)
            setattr(sys, name, stream)


def stdin_text(what: str) -> str:
    """All of standard input as UTF-8 text (a BOM ignored), of at most
    :data:`~decodekit.util.files.MAX_LINE_BYTES` (64 MiB): more, or bytes that are not UTF-8, is a
    UsageError naming ``what``; a stream that never ends (``/dev/zero``) is read no further."""
    from decodekit.util.files import MAX_LINE_BYTES, read_at_most

    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:  # a text-only stand-in (a test's StringIO)
        text = sys.stdin.read(MAX_LINE_BYTES + 1)
        data = None if len(text) > MAX_LINE_BYTES else text.encode("utf-8", "surrogatepass")
    else:
        data = read_at_most(stream, MAX_LINE_BYTES)
    if data is None:
        raise UsageError(f"standard input: {what} is longer than {MAX_LINE_BYTES:,} bytes")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        bad = data[e.start : e.start + 1]
        raise UsageError(f"standard input: {what} is not UTF-8 text (byte {e.start}: {bad!r})") from None


def _peer_lost(e: RuntimeError) -> str | None:
    """:func:`decodekit.distributed.peer_lost`, without importing torch where it is not loaded."""
    if "torch" not in sys.modules:
        return None
    from decodekit.distributed import peer_lost

    return peer_lost(e)


def os_error_message(e: OSError) -> str:
    """``PATH: reason`` (``No space left on device``, ``Read-only file system``, ...)."""
    if not e.strerror:
        return str(e)
    where = " -> ".join(str(name) for name in (e.filename, e.filename2) if name is not None)
    return f"{where}: {e.strerror}" if where else e.strerror


def _other_rank() -> bool:
    """Under torchrun with several processes, a rank other than 0."""
    return os.environ.get("RANK", "0") != "0" and os.environ.get("WORLD_SIZE", "1") != "1"


def rerun_command(add: str, drop: tuple[str, ...] = ()) -> str:
    """This invocation as a shell command, with the flag ``add`` and without the flags ``drop``."""
    if ARGV is None:
        return f"the same command with {add}"
    args = [a for a in ARGV if a not in drop and a != add]
    return shlex.join(["decodekit", *args, add])


def show_warning(message: Warning | str, category: type[Warning], *args: Any, **kwargs: Any) -> None:
    """Print a Python warning as ``Warning: <message>`` on stderr (one style for every command;
    no file path or source line of the package)."""
    click.echo(f"Warning: {message}", err=True)


MODEL_HELP = (
    "A decodekit checkpoint directory, an ARPA n-gram file (read through a binary cache kept beside "
    "it), a local transformers model directory (needs decodekit[hf]), a bundled model name, or a "
    "hub name (gpt2, org/name) in the local Hugging Face cache. Default: the bundled PTB LSTM."
)
HF_HELP = (
    "A local transformers causal LM directory (written by save_pretrained, safetensors weights; "
    "needs decodekit[hf]), or a hub name in the local Hugging Face cache: nothing is downloaded."
)
DEVICE_HELP = "cpu, cuda, cuda:1, ... or auto (a GPU if any)."


def model_options(command: Any = None, *, device: bool = True) -> Any:
    """The options every model-using command shares: --model, --hf-model and (unless ``device`` is
    False: a command that runs no model) --device, default auto. ``@model_options`` or
    ``@model_options(device=False)``."""
    if command is None:
        return lambda command: model_options(command, device=device)
    if device:
        command = click.option("--device", default="auto", show_default=True, help=DEVICE_HELP)(command)
    command = click.option("--hf-model", metavar="DIR", help=HF_HELP)(command)
    return click.option("--model", "model_spec", metavar="SPEC", help=MODEL_HELP)(command)


def load_model_option(model_spec: str | None, hf_model: str | None, device: str | None = None) -> Any:
    """The model the options name, on the device they name (None: the CPU), in one library call."""
    from decodekit import load_model

    if model_spec and hf_model:
        raise UsageError("give either --model or --hf-model, not both")
    where = None if device is None else resolve_device(device)
    if hf_model:
        return load_model(hf_model, device=where, kind="hf")
    return load_model(model_spec, device=where)


def resolve_device(name: str) -> Any:
    """``--device`` as a ``torch.device``: ``auto`` is a GPU if there is one (under torchrun, this
    process's GPU); a device that cannot be used here is a usage error."""
    import torch

    if name in ("auto", "cuda") and torch.cuda.is_available() and "LOCAL_RANK" in os.environ:
        return torch.device(f"cuda:{os.environ['LOCAL_RANK']}")  # one GPU per torchrun process
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(name)
    except RuntimeError as e:
        raise UsageError(f"invalid --device {name!r}: {e}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda was asked for but no CUDA device is available; use --device cpu")
    if dev.type == "meta":
        raise UsageError(
            "--device meta cannot run a model (meta tensors hold no data); use cpu, cuda or auto"
        )
    try:  # a backend torch knows by name but cannot use here fails in many ways
        torch.empty(0, device=dev)
    except Exception as e:
        reason = (str(e).strip().splitlines() or [type(e).__name__])[0].split(". ")[0][:160]
        raise UsageError(f"--device {name!r} is not usable here: {reason}") from None
    return dev


SMALL_MODEL = 20_000_000  # parameters: below this, one torch thread is the fastest on the CPU
THREADS_HELP = (
    "torch CPU threads. Default: 1 for a model of under 20M parameters (the bundled ones, n-grams), "
    "which runs faster on one thread (the bundled PTB LSTM's eval: 6.0 s wall with 1, 9.7 s with 2 "
    "on a loaded 2-core machine); torch's choice for larger models."
)


def file_option(flag: str, dest: str, help: str) -> Any:
    """A ``FILE`` option (``--dot FILE``): a path that is not a directory, kept as text so that
    the command opens it through the checked readers and writers of :mod:`decodekit.util.files`."""
    return click.option(flag, dest, type=click.Path(dir_okay=False), metavar="FILE", help=help)


def threads_option(command: Any) -> Any:
    """The ``--threads`` option of the model-using commands (see :func:`set_threads`)."""
    return click.option("--threads", type=click.IntRange(min=1), help=THREADS_HELP)(command)


def set_threads(threads: int | None, model: Any) -> None:
    """``torch.set_num_threads(threads)``; None: 1 for a model under :data:`SMALL_MODEL`
    parameters (counted on the model or its wrapped ``model``; none: 0), else unchanged."""
    import torch

    if threads is None:
        net = model if hasattr(model, "parameters") else getattr(model, "model", None)
        count = sum(p.numel() for p in net.parameters()) if hasattr(net, "parameters") else 0
        threads = 1 if count < SMALL_MODEL else None
    if threads:
        torch.set_num_threads(threads)


def need_vocab(model: Any, command: str) -> Any:
    """``model.vocab``, or a UsageError saying why ``command`` cannot work with text without one
    (a transformers directory without tokenizer files names them)."""
    vocab = getattr(model, "vocab", None)
    if vocab is None:
        why = getattr(model, "missing_tokenizer", None) or "this model has no vocabulary"
        raise UsageError(f"{command} needs text in and out, but {why}")
    return vocab
