"""The engine choice: the extension is built by the install, ROCKETSTORE_PURE forces pure Python, a missing
extension warns once and everything still works."""

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from click.testing import CliRunner

from rocketstore import engine
from rocketstore.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"


def _run(code: str, **env) -> subprocess.CompletedProcess:
    e = dict(os.environ, **{"PYTHONPATH": str(SRC), **env})
    e.pop("ROCKETSTORE_PURE", None) if "ROCKETSTORE_PURE" not in env else None
    return subprocess.run(
        [sys.executable, "-W", "default", "-c", textwrap.dedent(code)],
        env=e,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_install_built_the_extension():
    # `make setup` (pip install -e .) compiles it on every machine here (gcc and Python headers present);
    # this run's own engine is pure only when the pure pass asked for it
    if os.environ.get("ROCKETSTORE_PURE", "") in ("", "0"):
        assert engine.native is not None, engine.REASON
        assert engine.NAME == "native (C extension)"
    r = _run("from rocketstore import engine; print(engine.native is not None)")
    assert r.returncode == 0 and r.stdout.strip() == "True", r.stderr


def test_pure_env_forces_python():
    r = _run(
        """
        from rocketstore import engine
        from rocketstore.formats import javahash
        print(engine.native is None, javahash.java_string_hash is javahash.java_string_hash_py, engine.describe())
    """,
        ROCKETSTORE_PURE="1",
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "True True pure Python (ROCKETSTORE_PURE is set)"
    assert "RuntimeWarning" not in r.stderr  # asked for: no warning


def test_missing_extension_warns_once_and_works(tmp_path):
    # as if the install found no compiler: the import of rocketstore._native fails
    r = _run(f"""
        import sys
        sys.modules["rocketstore._native"] = None
        from rocketstore import MessageStore, Message, StoreConfig, engine
        import rocketstore.formats.javahash, rocketstore.cli.main
        cfg = StoreConfig(mapped_file_size_commit_log=1 << 20, mapped_file_size_consume_queue=20 * 100,
                          message_index_enable=False)
        with MessageStore.open({str(tmp_path / "s")!r}, cfg) as s:
            r = s.put(Message(topic="T", body=b"hello", tags="a"), 0)
            got = s.get("g", "T", 0, 0, 4)
            print(r.status.name, got.messages[0].body, engine.describe())
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("PUT_OK b'hello' pure Python (the compiled extension is not available")
    assert r.stderr.count("rocketstore runs in pure Python") == 1


def test_build_without_compiler_still_installs(tmp_path):
    # setup.py marks the extension optional: a failing compiler is a warning, not a failed install
    work = tmp_path / "pkg"
    shutil.copytree(ROOT / "src", work / "src", ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    shutil.copy(ROOT / "setup.py", work)
    env = dict(os.environ, CC="false", LDSHARED="false")
    r = subprocess.run(
        [
            sys.executable,
            "setup.py",
            "build_ext",
            "--build-lib",
            str(tmp_path / "lib"),
            "--build-temp",
            str(tmp_path / "tmp"),
        ],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "building optional extension" in (r.stdout + r.stderr).lower() or "failed" in (r.stdout + r.stderr).lower()
    assert not list((tmp_path / "lib").rglob("*.so"))


def test_version_names_the_engine():
    out = CliRunner().invoke(cli, ["--version"]).output
    assert out.strip().endswith(f"engine: {engine.describe()}")


def test_extension_built_from_other_sources_is_not_used(native, tmp_path):
    # a checkout updated without a rebuild: the module's SOURCE_HASH (setup.py's) no longer matches the sources
    # beside it, so its functions may not be the ones the Python modules call: pure Python, with a warning
    src = tmp_path / "src"
    shutil.copytree(SRC, src, ignore=shutil.ignore_patterns("__pycache__"))
    assert len(native.SOURCE_HASH) == 64
    probe = "from rocketstore import engine; print(engine.native is None, engine.describe())"
    same = _run(probe, PYTHONPATH=str(src))
    assert same.returncode == 0 and same.stdout.strip() == "False native (C extension)", same.stderr
    with open(src / "native" / "module.c", "a") as f:
        f.write("/* changed after the build */\n")
    r = _run(probe, PYTHONPATH=str(src))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "True pure Python (the compiled extension was built from other sources than these)"
    assert r.stderr.count("rebuild it (`make setup`") == 1


def test_unbuilt_checkout_runs_pure_python(tmp_path):
    # a source checkout where the extension was never built: the C sources (src/native/) are there, outside
    # the package, and nothing imports as rocketstore._native
    src = tmp_path / "src"
    shutil.copytree(SRC, src, ignore=shutil.ignore_patterns("*.so", "*.pyd", "__pycache__"))
    assert (src / "native" / "module.c").is_file() and not list(src.rglob("*.so"))
    assert not (src / "rocketstore" / "_native").exists()
    r = _run(
        f"""
        from rocketstore import MessageStore, Message, StoreConfig, engine
        cfg = StoreConfig(mapped_file_size_commit_log=1 << 20, mapped_file_size_consume_queue=20 * 100,
                          message_index_enable=False)
        with MessageStore.open({str(tmp_path / "s")!r}, cfg) as s:
            r = s.put(Message(topic="T", body=b"hello", properties={{"a": "b"}}), 0)
            got = s.get("g", "T", 0, 0, 4)
            print(r.status.name, got.messages[0].body, engine.native is None)
        """,
        PYTHONPATH=str(src),
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "PUT_OK b'hello' True"
    assert r.stderr.count("rocketstore runs in pure Python") == 1
    assert "the compiled extension is not available" in r.stderr


def test_using_switches_every_binding_and_puts_them_back(native):
    """engine.using("pure") in a process running the extension: the twins every loaded module bound and
    engine.native switch (put/ asks engine.native when it runs), and come back."""
    import rocketstore.spark.record_batch as RB
    from rocketstore.formats import javahash, record
    from rocketstore.put import batch_topic, writer
    from rocketstore.read import get_message
    from rocketstore.store import topic_table

    before = {m: dict(vars(m)) for m in (javahash, record, get_message, topic_table, writer, batch_topic, RB, engine)}
    with engine.using("pure"):
        assert engine.native is None
        assert javahash.java_string_hash is javahash.java_string_hash_py
        assert topic_table.java_string_hash is javahash.java_string_hash_py
        assert get_message.decode_record is record.decode_record_py
        assert RB.from_records is RB.from_records_py and RB.from_records_native is not RB.from_records_py
        assert batch_topic.put is batch_topic.put_py and batch_topic.put_batch is batch_topic.put_batch_py
        # nothing loaded still holds a native side (the names defining the sides aside)
        natives = {id(engine.native_side(t.name)): t.name for t in engine.TWINS} | {id(native): "the extension"}
        defining = {tuple(w.split(":")) for t in engine.TWINS for w in (t.reference, t.native) if ":" in w}
        defining.add(("rocketstore.engine", "EXTENSION"))
        left = [
            f"{name}.{key}: {natives[id(value)]}"
            for name, m in list(sys.modules.items())
            if m is not None and m is not native and name.startswith("rocketstore")
            for key, value in vars(m).items()
            if id(value) in natives and (name, key) not in defining and value is not None
        ]
        assert not left, left
        with engine.using("native"):  # nested: the extension again inside
            assert engine.native is native and javahash.java_string_hash is native.java_string_hash
        assert javahash.java_string_hash is javahash.java_string_hash_py
    for m, names in before.items():
        now = vars(m)
        assert [k for k in names if now.get(k) is not names[k]] == [], m.__name__
