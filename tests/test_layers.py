"""Data flows one way (docs/architecture.md, ../shared/STYLE.md section 3): the import graph says so.

vocab -> models (protocol + nets) -> decoding (strategies, the memory estimate, generation) -> jobs
-> cli; constraints sit beside the models and import neither them nor the decoders; the decoders see
models only through the protocol (models.base) and the generic state operations (models.state), and
generation (the plan above the loop) also through the protocol's wrappers (models.controls,
models.suppress); training sits beside decoding; checkpoint and loading sit above the models; the
utilities (errors, and util: checks, files, locking, lazy) are the lowest layer. The CLI uses only
the public API and the named plumbing modules, and registers its commands from one table. The
constraint compiler is filed by stage (syntax -> automata -> tokens -> its face compile.py;
frontends on syntax), and each stage imports only the earlier ones."""

import ast
import importlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "decodekit"


def imports(path: Path) -> set[str]:
    """Every decodekit module imported anywhere in the file (including inside functions)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("decodekit"):
            found.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("decodekit"))
    return found


def files(sub: str):
    target = PACKAGE / sub
    return [target] if target.suffix == ".py" else sorted(target.rglob("*.py"))


RULES = [
    # (files, forbidden import prefixes, allowed exceptions)
    (
        "decoding",
        (
            "decodekit.models",
            "decodekit.cli",
            "decodekit.training",
            "decodekit.checkpoint",
            "decodekit.loading",
        ),
        (
            "decodekit.models.base",
            "decodekit.models.state",
            # generation only (DEPENDS says which module): the protocol's wrappers
            "decodekit.models.controls",
            "decodekit.models.suppress",
        ),
    ),
    ("constraints", ("decodekit.models", "decodekit.decoding", "decodekit.cli", "decodekit.training"), ()),
    ("models", ("decodekit.decoding", "decodekit.cli", "decodekit.training"), ()),
    ("outputs.py", ("decodekit.models", "decodekit.decoding", "decodekit.constraints", "decodekit.cli"), ()),
    ("vocab.py", ("decodekit.models", "decodekit.decoding", "decodekit.constraints", "decodekit.cli"), ()),
    ("training", ("decodekit.decoding", "decodekit.cli"), ()),
    # what the decoders see of the models imports no concrete model
    ("models/base.py", ("decodekit.models",), ()),
    ("models/state.py", ("decodekit.models",), ("decodekit.models.base",)),
    # the configs (read by train --help without torch) import no model
    ("models/configs.py", ("decodekit.models",), ()),
]


@pytest.mark.parametrize("sub,forbidden,allowed", RULES, ids=[r[0] for r in RULES])
def test_imports_flow_one_way(sub, forbidden, allowed):
    bad = []
    for path in files(sub):
        for name in imports(path):
            if name.startswith(forbidden) and not name.startswith(allowed):
                bad.append(f"{path.relative_to(PACKAGE.parent)} imports {name}")
    assert not bad, "\n".join(bad)


# The whole picture: what each part of the package may import (prefixes under decodekit.; the
# part's own modules are always allowed). A part is a top-level module or sub-package, or a
# sub-package or module listed by its dotted name ("constraints.syntax", "decoding.memory"): a
# module belongs to the longest listed part that contains it. Lowest first; a new module needs a line here.
DEPENDS = {
    "errors": (),
    # util.lazy: names imported on first use, former module names; util.checks: argument checks
    # (ConfigError), torch-free; util.files: checked reads and writes; util.locking: one writer
    "util": ("errors",),
    "distributed": (),  # torchrun helpers
    "vocab": ("errors", "util"),
    "outputs": ("vocab",),  # what one search returns, in memory: Hypothesis, SearchTree
    "data": ("errors", "util", "vocab"),  # corpora -> token ids -> BPTT batches
    "tasks": ("errors", "vocab"),  # formal languages and PCFGs (synthetic corpora)
    "plotting": ("errors", "util"),  # training curves (matplotlib, optional)
    # the constraint compiler, by stage (docs/architecture.md): each stage imports only earlier ones
    "constraints.syntax": ("errors",),  # regex text -> AST; the Unicode tables
    # JSON Schema -> a regex, a Pattern expression where it needs an intersection, or a grammar
    # (constraints.grammar's CFG) where a $ref is recursive
    "constraints.frontends": ("errors", "constraints.syntax", "constraints.automata", "constraints.grammar"),
    "constraints.automata": ("errors", "constraints.syntax"),  # AST -> char DFA -> byte DFA; products
    # context-free grammars: the CFG, its readers, and its Earley byte states (over the automata)
    "constraints.grammar": ("errors", "constraints.syntax", "constraints.automata"),
    # trie, lift, the protocols, automata, masks; util.collector: the collector paused for a walk
    "constraints.tokens": ("errors", "util", "constraints.automata"),
    "constraints": (  # the face: compile_regex, the cache, one build ladder; beside the models
        "util",
        "errors",
        "vocab",
        "constraints.syntax",
        "constraints.frontends",
        "constraints.grammar",
        "constraints.automata",
        "constraints.tokens",
    ),
    "models": ("util", "errors", "vocab"),  # the step protocol and the nets
    "checkpoint": ("errors", "util", "vocab", "models"),
    "loading": ("errors", "checkpoint", "models"),
    # a search's memory estimate: it sums what the strategy it is handed (config.search)
    # declares, so it never imports the decoders
    "decoding.memory": ("errors", "constraints", "models.base"),
    # the strategies (decoding.strategies: the one table of them), their selections and the
    # loop; the decoders see models only through the protocol and the state operations
    "decoding": (
        "util",
        "errors",
        "outputs",
        "constraints",
        "decoding.memory",
        "models.base",
        "models.state",
    ),
    # GenerationConfig names a strategy of decoding.strategies.STRATEGIES; generate runs it
    "decoding.generation": (
        "errors",
        "util",
        "outputs",
        "constraints",
        "decoding",
        "decoding.memory",
        "models.base",
        "models.controls",
        "models.suppress",
    ),
    "logits_processor": ("errors", "constraints", "models.hf"),  # constraints in transformers' generate
    "result_file": ("errors", "util"),  # a job's JSON-lines result file on disk (decodekit.results)
    # generation jobs over JSON lines: one process or every rank of a torchrun run
    "jobs": (
        "errors",
        "util",
        "decoding.generation",
        "decoding.memory",
        "result_file",
        "distributed",
        "models.base",
    ),
    # beside decoding: never imports the decoders, generation or the CLI
    "training": (
        "util",
        "errors",
        "distributed",
        "data",
        "models",
        "checkpoint",
    ),
    "cli": ("",),  # the public API only: test_cli_uses_the_public_api
    "__main__": ("cli",),
    "__init__": ("",),  # the public API: every name, imported lazily
}


def part_of(module: str) -> str | None:
    """The listed part a dotted name under ``decodekit.`` belongs to: its longest listed prefix."""
    names = module.split(".")[1:]
    for k in range(len(names), 0, -1):
        if ".".join(names[:k]) in DEPENDS:
            return ".".join(names[:k])
    return None


def part(path: Path) -> str:
    """The part of the package a file belongs to: its top-level module or sub-package, or the
    listed sub-package or module (dotted) holding it."""
    rel = path.relative_to(PACKAGE)
    top = rel.parts[0] if len(rel.parts) > 1 else rel.stem
    inner = part_of(".".join(("decodekit", *rel.parts[:-1], rel.stem)))
    return inner if inner is not None and inner.startswith(top + ".") else top


def test_every_module_has_a_place():
    parts = {part(p) for p in PACKAGE.rglob("*.py")}
    assert parts <= set(DEPENDS), f"add to DEPENDS: {sorted(parts - set(DEPENDS))}"


@pytest.mark.parametrize("name", sorted(DEPENDS))
def test_each_part_imports_only_what_it_may(name):
    """A part imports its own modules (not those of a listed part inside it: ``constraints``, the
    face, may import its stages only as listed) and what it may."""
    allowed = tuple(f"decodekit.{d}".rstrip(".") for d in DEPENDS[name])
    bad = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if part(path) != name:
            continue
        for imported in imports(path):
            own = part_of(imported) == name
            if not own and not any(imported == a or imported.startswith(a + ".") for a in allowed):
                bad.append(f"{path.relative_to(PACKAGE.parent)} imports {imported}")
    assert not bad, "\n".join(bad)


def test_the_picture_has_no_cycles():
    def node(dep: str) -> str:  # a dependency's part: "models.base" -> "models"
        return part_of(f"decodekit.{dep}") or dep.split(".")[0]

    graph = {n: {node(d) for d in deps if d} - {n} for n, deps in DEPENDS.items()}
    done: set[str] = set()

    def visit(n: str, path: tuple[str, ...]) -> None:
        assert n not in path, " -> ".join((*path, n))
        if n not in done:
            for d in graph[n]:
                visit(d, (*path, n))
            done.add(n)

    for n in graph:
        visit(n, ())


def public_names(module: str) -> set[str]:
    """A public package's ``__all__`` (``decodekit`` and ``decodekit.models`` import lazily)."""
    return set(importlib.import_module(module).__all__)


PUBLIC = ("decodekit", "decodekit.constraints", "decodekit.training", "decodekit.models")

# The plumbing the CLI shares with the library but a user of the library does not need (so it is
# not in decodekit.__all__): from these modules the CLI imports what they define themselves, under
# a public name (no re-exports, no _private names).
PLUMBING = (
    "decodekit.jobs",  # the rank split of a JSON-lines job, its errors, the progress total
    "decodekit.distributed",  # torchrun's rank and world
    "decodekit.util.locking",  # one writer per output
    "decodekit.util.files",  # checked reads and writes of the files a command names
    "decodekit.decoding.memory",  # --max-memory sizes
    "decodekit.data",  # corpora as token ids
)


def defined_in(module: str) -> set[str]:
    """The public names a module defines itself (functions, classes, assignments at top level)."""
    path = PACKAGE.parent.joinpath(*module.split(".")).with_suffix(".py")
    names = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return {n for n in names if not n.startswith("_")}


@pytest.mark.parametrize("path", files("cli"), ids=lambda p: p.name)
def test_cli_uses_the_public_api(path):
    """The CLI imports names from ``decodekit`` (and the packages above, by their ``__all__``),
    the names the PLUMBING modules define, and its own modules; never another module inside the
    library."""
    bad = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            bad += [a.name for a in node.names if a.name.startswith("decodekit.")]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("decodekit"):
            if node.module == "decodekit.cli" or node.module.startswith("decodekit.cli."):
                continue
            public = public_names(node.module) if node.module in PUBLIC else set()
            if node.module in PLUMBING:
                public = defined_in(node.module)
            bad += [f"{node.module}.{a.name}" for a in node.names if a.name not in public]
    assert not bad, f"{path.relative_to(PACKAGE.parent)} imports {', '.join(sorted(bad))}"


def test_the_plumbing_stays_out_of_the_public_api():
    """No name of a PLUMBING module the CLI uses is also in ``decodekit.__all__`` (one way in)."""
    both = []
    for path in files("cli"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module in PLUMBING:
                both += [a.name for a in node.names if a.name in public_names("decodekit")]
    assert not both, f"in decodekit.__all__ and imported as plumbing: {sorted(set(both))}"


def test_only_the_cli_uses_click():
    users = [p for p in PACKAGE.rglob("*.py") if "import click" in p.read_text(encoding="utf-8")]
    assert all(p.parent.name == "cli" for p in users), users


def test_commands_are_registered_from_one_table():
    """No module of ``cli/`` imports the group (``decodekit.cli``, the package that imports them):
    each defines a plain ``click.Command``, and ``cli.COMMANDS`` is the one table of them."""
    from decodekit.cli import COMMANDS

    back, defined = [], set()
    for path in files("cli"):
        if path.name == "__init__.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "decodekit.cli":
                back.append(f"{path.name} imports {', '.join(a.name for a in node.names)} from decodekit.cli")
            elif isinstance(node, ast.Call) and ast.unparse(node.func) in ("click.command", "click.group"):
                name = node.args[0].value if node.args else None
                defined.add(f"{name}={path.stem}")
    assert not back, back
    listed = {f"{name}={where.split(':')[0].rsplit('.', 1)[1]}" for name, where in COMMANDS.items()}
    assert defined == listed


def test_no_private_name_crosses_a_module():
    """A module's ``_name`` is its own: nothing imports it from another module of the package
    (what another module needs is public, named for what it is)."""
    bad = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("decodekit"):
                bad += [
                    f"{path.relative_to(PACKAGE.parent)}:{node.lineno} imports {node.module}.{a.name}"
                    for a in node.names
                    if a.name.startswith("_") and not a.name.startswith("__")
                ]
    assert not bad, "\n".join(bad)
