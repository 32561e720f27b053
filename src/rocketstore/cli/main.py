"""The `rocketstore` command: operators' tools over a store directory (click, with rich tables; --json
for scripts). Errors are one line on stderr and a non-zero exit status."""
from __future__ import annotations

import itertools
import json
import os
import sys

import click
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from .. import MessageStore, StoreConfig
from ..errors import CorruptDataError, RocketStoreError
from ..formats import index as IX
from . import dump as D
from .inspect_store import inspect_store


def _fail(message: str) -> None:
    click.echo(f"rocketstore: error: {message}", err=True)
    sys.exit(1)


def _config(conf: str | None) -> StoreConfig:
    try:
        return StoreConfig.from_properties(conf) if conf else StoreConfig()
    except (OSError, ValueError) as e:
        _fail(f"{conf}: {e}")


def open_store(path: str, cfg: StoreConfig, read_only: bool = False, check_commitlog: bool = True) -> MessageStore:
    """MessageStore.open with a progress bar over recovery on a terminal (a crashed store re-checks every
    record since its checkpoint, which can take a while)."""
    console = Console(stderr=True)
    columns = (TextColumn("recovering the CommitLog"), BarColumn(), DownloadColumn(), TimeRemainingColumn())
    with Progress(*columns, console=console, transient=True, disable=not console.is_terminal) as bar:
        task = bar.add_task("", total=None)
        return MessageStore.open(path, cfg, read_only=read_only, check_commitlog=check_commitlog,
                                 progress=lambda done, total: bar.update(task, completed=done, total=total))


def _print(title: str, header: dict | None, rows: list[dict], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps({"title": title, "header": header, "rows": rows}, ensure_ascii=False))
        return
    console = Console()
    if header:
        t = Table(title=title, show_header=False)
        for k, v in header.items():
            t.add_row(k, str(v))
        console.print(t)
        title = None
    if rows:
        columns = list(dict.fromkeys(k for r in rows for k in r))
        t = Table(title=title)
        for c in columns:
            t.add_column(c, overflow="fold")
        for r in rows:
            t.add_row(*("" if r.get(c) is None else str(r.get(c)) for c in columns))
        console.print(t)
    elif not header:
        console.print(f"{title}: nothing written")


@click.group()
@click.version_option(package_name="rocketstore")
def cli():
    """Tools for Apache RocketMQ store directories (rocketstore)."""


@cli.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--kind", type=click.Choice(D.KINDS), help="The file's kind, when its place does not say it.")
@click.option("--limit", type=int, default=None, help="At most this many rows.")
@click.option("--skip", type=int, default=0, help="Skip this many rows first.")
@click.option("--hash-slots", type=int, default=None, help="maxHashSlotNum of an index file "
              "(default: from broker.conf, else inferred when maxIndexNum = 4 x maxHashSlotNum).")
@click.option("-c", "--conf", type=click.Path(dir_okay=False), help="A RocketMQ broker.conf.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
def dump(file, kind, limit, skip, hash_slots, conf, as_json):
    """Decode one store file: a CommitLog segment, a ConsumeQueue or batch ConsumeQueue file, an index
    file or the checkpoint, with offsets (like Kafka's kafka-dump-log)."""
    if not os.path.isfile(file):
        _fail(f"{file}: no such file")
    kind = kind or D.kind_of(file)
    if kind is None:
        _fail(f"{file}: cannot tell what kind of store file this is; say it with --kind")
    header = None
    try:
        if kind == "checkpoint":
            header, rows = D.checkpoint_header(file), iter(())
        elif kind == "index":
            slots = hash_slots or _hash_slots(file, _config(conf) if conf else None)
            header, rows = D.index_header(file, slots), D.index_rows(file, slots)
        else:
            rows = getattr(D, f"{kind}_rows")(file)
        rows = list(itertools.islice(rows, skip, None if limit is None else skip + limit))
    except (CorruptDataError, OSError, ValueError) as e:
        _fail(f"{file}: {e}")
    _print(f"{kind} {file}", header, rows, as_json)


def _hash_slots(path: str, cfg: StoreConfig | None) -> int:
    size = os.path.getsize(path)
    if cfg is not None and cfg.max_hash_slot_num is not None and cfg.max_index_num is not None:
        if IX.file_size(cfg.max_hash_slot_num, cfg.max_index_num) != size:
            _fail(f"{path}: {size} bytes does not match maxHashSlotNum={cfg.max_hash_slot_num}, "
                  f"maxIndexNum={cfg.max_index_num}")
        return cfg.max_hash_slot_num
    if size > IX.HEADER_SIZE and (size - IX.HEADER_SIZE) % 84 == 0:
        return (size - IX.HEADER_SIZE) // 84
    _fail(f"{path}: cannot infer the index sizes from {size} bytes; give --hash-slots or -c broker.conf")


@cli.command()
@click.argument("store", type=click.Path(file_okay=False))
@click.option("-c", "--conf", type=click.Path(dir_okay=False), help="A RocketMQ broker.conf.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
def inspect(store, conf, as_json):
    """A whole store at a glance: topics and queues, files and their fill, disk use, the checkpoint, the
    abort state and how far dispatch is behind. Opens the store read-only."""
    if not os.path.isdir(store):
        _fail(f"{store}: no store directory here")
    try:
        with open_store(store, _config(conf), read_only=True) as s:
            report = inspect_store(s)
    except RocketStoreError as e:
        _fail(str(e))
    if as_json:
        click.echo(json.dumps(report, ensure_ascii=False))
        return
    _print(f"store {report['root']}", report["summary"], [], False)
    _print("files", None, report["files"], False)
    _print("queues", None, report["queues"], False)
    _print("checkpoint", report["checkpoint"], [], False)


@cli.command()
@click.argument("store", type=click.Path(exists=True, file_okay=False))
@click.option("-c", "--conf", type=click.Path(exists=True, dir_okay=False), help="A RocketMQ broker.conf "
              "(file sizes, enabledAppendPropCRC, messageDelayLevel); sizes are inferred from the files otherwise.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
def verify(store, conf, as_json):
    """Check every CommitLog record (structure, CRCs, BLANK fillers), every ConsumeQueue and batch
    ConsumeQueue unit against its record, every index entry and the checkpoint. Reads the files directly,
    changing nothing. Exit status 0 when the store is sound, 1 when problems were found."""
    from . import verify as V
    try:
        cfg = StoreConfig.from_properties(conf) if conf else StoreConfig()
    except (OSError, ValueError) as e:
        raise click.BadParameter(str(e), param_hint="-c/--conf") from None
    try:
        if as_json or V.segment_count(store) < PROGRESS_SEGMENTS:
            report = V.verify_store(store, cfg)
        else:
            report = _verify_with_progress(V, store, cfg)
    except (OSError, RocketStoreError) as e:
        _fail(f"{store}: {e}")
    if as_json:
        click.echo(json.dumps(report, ensure_ascii=False))
    else:
        _print_verify(report)
    sys.exit(0 if report["ok"] else 1)


PROGRESS_SEGMENTS = 16  # a progress bar from this many CommitLog segments on


def _verify_with_progress(V, store, cfg):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    with Progress(TextColumn("verifying {task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("commitlog", total=V.segment_count(store))

        def progress(kind, done, total):
            if kind == "commitlog":
                bar.update(task, completed=done, total=total)
            else:
                bar.update(task, description=kind)
        return V.verify_store(store, cfg, progress)


def _print_verify(report: dict) -> None:
    console = Console()
    t = Table(title=f"verify {report['root']}", show_header=False)
    for k, v in report["checked"].items():
        t.add_row(k, str(v))
    t.add_row("commitLogMinOffset", str(report["commitLog"]["minOffset"]))
    t.add_row("commitLogMaxOffset", str(report["commitLog"]["maxOffset"]))
    t.add_row("problems", str(len(report["problems"])))
    console.print(t)
    for n in report["notes"]:
        console.print(f"note: {n}", highlight=False, markup=False, soft_wrap=True)
    if report["problems"]:
        _print("problems", None, report["problems"], False)
        console.print(f"{len(report['problems'])} problem(s) found", style="bold red")
    else:
        console.print("the store is sound", style="bold green")


from .commands import register as _register_commands  # noqa: E402  produce, consume, query, topics, queues
_register_commands(cli)
from .maintain import register as _register_maintenance  # noqa: E402  rebuild, clean, recover
_register_maintenance(cli)

from .serve import register as _register_serve  # noqa: E402  serve (gRPC, RocketMQ 5 clients)
_register_serve(cli)


def main() -> None:
    cli(prog_name="rocketstore")
