"""The engine is chosen in one place (rocketstore.engine): its table of twins names each function's pure reference
and native side, and modules take the chosen function from it. Read from every module's syntax tree (as
test_import_layers does): no module but the engine binds the extension or one of its functions to a name, and no
module binds a twin's public name but by importing it from the engine."""

import ast
import sys
from pathlib import Path

import pytest

import rocketstore
from rocketstore import engine

PACKAGE = Path(rocketstore.__file__).parent

# modules still picking their engine themselves, listed so the test says when one stops (none today)
PENDING: set[str] = set()


def _is_engine_native(node) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "native"
        and isinstance(node.value, ast.Name)
        and node.value.id == "engine"
    )


def _binds_extension(value) -> bool:
    """An expression whose value is the extension or one of its functions: `engine.native`, `engine.native.f`
    not called, or either as a branch of a conditional."""
    if isinstance(value, ast.IfExp):
        return _binds_extension(value.body) or _binds_extension(value.orelse)
    if isinstance(value, ast.BoolOp):
        return any(_binds_extension(v) for v in value.values)
    return _is_engine_native(value) or (isinstance(value, ast.Attribute) and _is_engine_native(value.value))


def _assigned(node):
    if isinstance(node, ast.Assign):
        return node.value
    if isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.NamedExpr)):
        return node.value
    return None


def _top_level(tree):
    """The statements run at import: the module's and its classes' bodies, into if/try/with blocks."""
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        yield node
        for field in ("body", "orelse", "finalbody", "handlers"):
            todo.extend(getattr(node, field, []) or [])


def problems_of(rel: str, text: str) -> list[str]:
    """How a module (its path in the package, its source) binds the extension or picks a twin itself. A
    function may ask `engine.native` and keep the answer while it runs; what runs at import may not keep it."""
    tree = ast.parse(text, rel)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            names = {a.name for a in node.names}
            module = node.module or ""
            if module.endswith("_native") or "_native" in names:
                out.append(f"{rel}:{node.lineno} imports the extension")
            if module.split(".")[-1] == "engine" and "native" in names:
                out.append(f"{rel}:{node.lineno} imports engine.native as a name")
        elif isinstance(node, ast.Import) and any(a.name.endswith("_native") for a in node.names):
            out.append(f"{rel}:{node.lineno} imports the extension")
    twins = {t.name for t in engine.TWINS}
    for node in _top_level(tree):
        value = _assigned(node)
        if value is not None and _binds_extension(value):
            out.append(f"{rel}:{node.lineno} binds the extension to a name")
        elif value is not None and any(_is_engine_native(n) for n in ast.walk(value)):
            out.append(f"{rel}:{node.lineno} keeps what engine.native was at import")
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        for t in targets:
            if isinstance(t, ast.Name) and t.id in twins:
                out.append(f"{rel}:{node.lineno} binds the twin {t.id} itself")
    return out


def test_the_check_sees_each_way_of_binding():
    src = (
        "from .. import _native\n"
        "import rocketstore._native\n"
        "from ..engine import native\n"
        "_native = engine.native\n"
        "f = engine.native.f if engine.native is not None else g\n"
        "ONE_CALL = engine.native is not None\n"
        "parse_properties = parse_properties_py\n"
        "def ok():  # asked when it runs\n"
        "    got = engine.native.f(1) if engine.native is not None else None\n"
        "    native = engine.native\n"
        "    return got, native\n"
    )
    got = sorted(problems_of("probe.py", src), key=lambda p: int(p.split(":")[1].split(" ")[0]))
    assert [p.split(" ", 1)[1] for p in got] == [
        "imports the extension",
        "imports the extension",
        "imports engine.native as a name",
        "binds the extension to a name",
        "binds the extension to a name",
        "keeps what engine.native was at import",
        "binds the twin parse_properties itself",
    ], got


def test_no_module_but_the_engine_picks_an_engine():
    sources = sorted(PACKAGE.rglob("*.py"))
    assert len(sources) > 100
    wrong, pending = [], set()
    for path in sources:
        rel = path.relative_to(PACKAGE).as_posix()
        if rel == "engine.py":
            continue
        found = problems_of(rel, path.read_text())
        if rel in PENDING:
            pending.update([rel] if found else [])
        else:
            wrong.extend(found)
    assert not wrong, "\n".join(wrong)
    assert pending == PENDING, f"{sorted(PENDING - pending)} take their twins from the engine now: drop from PENDING"


def test_twins_are_imported_from_the_engine():
    """A twin's public name is imported from rocketstore.engine, never from the module of its reference."""
    homes = {t.name: t.reference.partition(":")[0] for t in engine.TWINS}
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel == "engine.py" or rel in PENDING:
            continue
        parts = ("rocketstore", *path.relative_to(PACKAGE).with_suffix("").parts)
        package = list(parts[:-1])
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                base = package[: len(package) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            for a in node.names:
                if homes.get(a.name) == module:
                    wrong.append(f"{rel}:{node.lineno} imports {a.name} from {module}")
    assert not wrong, "\n".join(wrong)


def test_every_twin_has_both_sides():
    seen = set()
    for t in engine.TWINS:
        assert t.name not in seen, f"{t.name} twice in the table"
        seen.add(t.name)
        ref = engine.reference(t.name)
        assert callable(ref), t
        chosen = getattr(engine, t.name)
        home = sys.modules[t.reference.partition(":")[0]]
        if hasattr(home, t.name):  # the reference's module re-exports the chosen twin under the public name
            assert getattr(home, t.name) is chosen, t
        if engine.EXTENSION is None:
            assert chosen is ref, t
            continue
        nat = engine.native_side(t.name)
        assert callable(nat) and nat is not ref, t
        assert chosen is (ref if engine.native is None else nat), t


def test_the_native_side_needs_the_extension():
    if engine.EXTENSION is not None:
        pytest.skip("the extension is loaded: this checks the pure engine's answer (ROCKETSTORE_PURE=1 runs it)")
    with pytest.raises(RuntimeError, match="no native side"):
        engine.native_side("java_string_hash")
    with pytest.raises(RuntimeError, match="no native engine"):
        with engine.using("native"):
            pass
    with engine.using("pure"):  # the engine it runs: nothing to swap
        assert engine.native is None


def test_unknown_names():
    with pytest.raises(AttributeError):
        engine.no_such_twin  # noqa: B018
    with pytest.raises(ValueError):
        with engine.using("fast"):
            pass
