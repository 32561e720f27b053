"""The package's layers, read from every module's imports (its syntax tree, not by importing it): a module imports
only from its own layer or lower ones, so the store never depends on a protocol, the Spark layer or the CLI, and
the format layer on nothing but the base. From the bottom:

  base (errors, engine and the extension, validation) -> formats, files (with the store's layout) -> config,
  message -> log (segments and queues) -> services (flush, reput, recovery, cleanup, index) -> the store (store/
  the facade and its collaborators, put/, read/, maintenance/, filter/) -> broker (the broker's state and rules, no protocol) -> grpc (RocketMQ 5's
  protocol), remoting (RocketMQ 4.x's), spark -> cli (which wires both protocols into `rocketstore serve`)

grpc and remoting are two adapters over broker and import neither each other nor spark (spark neither of them)."""

import ast
from pathlib import Path

import rocketstore

PACKAGE = Path(rocketstore.__file__).parent

RANKS = {
    "errors": 0, "engine": 0, "_native": 0, "validation": 0,
    "formats": 1, "files": 1,
    "config": 2, "message": 2,
    "log": 3,
    "services": 4,
    "store": 5, "put": 5, "read": 5, "maintenance": 5, "filter": 5,
    "broker": 6,
    "grpc": 7, "remoting": 7, "spark": 7, "console": 7,
    "cli": 8,
}  # fmt: skip
ADAPTERS = ("grpc", "remoting", "spark", "console")
APART = {(a, b) for a in ADAPTERS for b in ADAPTERS if a != b}


def layer_of(module: str) -> str:
    """'rocketstore.log.consume_queue' -> 'log'; the package itself and its public names ('rocketstore',
    'rocketstore.Message') are the store's."""
    parts = module.split(".")
    if len(parts) == 1:
        return "store"
    top = parts[1]
    is_module = top in RANKS or (PACKAGE / top).is_dir() or (PACKAGE / f"{top}.py").exists()
    return top if is_module else "store"


def imports_of(path: Path) -> set[str]:
    """The rocketstore modules a source file imports (relative imports resolved), at any depth in the file."""
    module = ".".join(("rocketstore", *path.relative_to(PACKAGE).with_suffix("").parts))
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    if path.name == "__init__.py":
        package = package[:-1]  # 'rocketstore.log.__init__' is the package rocketstore.log
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
                names = [target] if node.module else [f"{target}.{a.name}" for a in node.names]
            else:
                names = [node.module or ""]
            found.update(n for n in names if n == "rocketstore" or n.startswith("rocketstore."))
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("rocketstore"))
    return found


def test_layer_of():
    assert layer_of("rocketstore.formats.record") == "formats"
    assert layer_of("rocketstore.config.files") == "config"
    assert layer_of("rocketstore.put.writer") == "put"
    assert layer_of("rocketstore") == "store"
    assert layer_of("rocketstore.Message") == "store"


def test_relative_imports_resolve():
    """imports_of on a module of the real tree: its relative imports come out as absolute names."""
    found = imports_of(PACKAGE / "log" / "consume_queue.py")
    assert any(m.startswith("rocketstore.formats") for m in found), found
    assert all(m.startswith("rocketstore") for m in found)


def test_every_module_imports_only_its_layer_or_lower():
    wrong = []
    sources = sorted(PACKAGE.rglob("*.py"))
    assert len(sources) > 100  # the whole package was read
    for path in sources:
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        module = ".".join(("rocketstore", *(parts[:-1] if parts[-1] == "__init__" else parts)))
        me = layer_of(module)
        for target in imports_of(path):
            other = layer_of(target)
            assert other in RANKS and me in RANKS, f"{module} or {target}: a package or module with no rank"
            if RANKS[other] > RANKS[me] or (me, other) in APART:
                wrong.append(f"{path.relative_to(PACKAGE)} ({me}) imports {target} ({other})")
    assert not wrong, "\n".join(wrong)
