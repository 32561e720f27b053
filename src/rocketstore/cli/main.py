"""The `rocketstore` command: operators' tools over a store directory (click, with rich tables; --json
for scripts). Errors are one line on stderr and a non-zero exit status."""

from __future__ import annotations

import itertools
import json
import os
import sys

import click
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

from .. import MessageStore, StoreConfig, engine
from ..config.store_config import unknown_keys
from ..errors import CorruptDataError, RocketStoreError
from ..formats import index as IX
from . import dump as D
from . import output as O
from .inspect_store import inspect_store


BROKEN_PIPE_STATUS = 128 + 13  # as a shell reports a tool killed by SIGPIPE (`yes | head -1`)


def fail(message: str) -> None:
    if isinstance(sys.exc_info()[1], BrokenPipeError):  # stdout's reader left (`| head`): not an error
        end_quietly()
    click.echo(f"rocketstore: error: {message}", err=True)
    sys.exit(1)


def os_problem(e: OSError, path: str) -> str:
    """An OSError as one line naming the path and the problem ("/s/lock: Read-only file system")."""
    where = e.filename if e.filename is not None else path
    if e.filename2 is not None:
        where = f"{where} -> {e.filename2}"
    return f"{where}: {e.strerror or e}"


def end_quietly() -> None:
    """stdout's reader closed the pipe: stop without a word, as other Unix tools do. What Python still holds
    for stdout goes to /dev/null (else its flush at exit would complain)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
    sys.exit(BROKEN_PIPE_STATUS)


def load_config(conf: str | None) -> StoreConfig:
    try:
        cfg = StoreConfig.from_properties(conf) if conf else StoreConfig()
    except (OSError, ValueError) as e:
        fail(f"{conf}: {e}")
    warn_unknown_keys(conf)
    return cfg


_warned_confs: set = set()


def warn_unknown_keys(conf: str | None) -> None:
    """One warning line on stderr per broker.conf key that nothing knows (a typo: it would be ignored), with the
    closest known name; keys of RocketMQ's broker, proxy and store settings are not warned about. Once per file."""
    if not conf or conf in _warned_confs:
        return
    _warned_confs.add(conf)
    try:
        unknown = unknown_keys(conf)
    except (OSError, ValueError):  # loading the file says what is wrong
        return
    for key, close in unknown:
        hint = f"; did you mean {close}?" if close else ""
        click.echo(f"rocketstore: warning: {conf}: unknown key {key} (ignored){hint}", err=True)


def open_store(path: str, cfg: StoreConfig, read_only: bool = False, check_commitlog: bool = True) -> MessageStore:
    """MessageStore.open with a progress bar over recovery on a terminal (a crashed store re-checks every
    record since its checkpoint, which can take a while)."""
    console = O.console(stderr=True)
    columns = (TextColumn("recovering the CommitLog"), BarColumn(), DownloadColumn(), TimeRemainingColumn())
    with Progress(*columns, console=console, transient=True, disable=not console.is_terminal) as bar:
        task = bar.add_task("", total=None)
        return MessageStore.open(
            path,
            cfg,
            read_only=read_only,
            check_commitlog=check_commitlog,
            progress=lambda done, total: bar.update(task, completed=done, total=total),
        )


def print_result(title: str, header: dict | None, rows: list[dict], as_json: bool, wide: bool = False) -> None:
    if as_json:
        O.echo_json({"title": title, "header": header, "rows": rows})
        return
    out = O.console()
    if header:
        O.print_header(title, header, out)
        title = None
    if rows:
        O.print_table(title, rows, list(dict.fromkeys(k for r in rows for k in r)), out, wide=wide)
    elif not header:
        out.print(f"{title}: nothing written")


STORE_ENTRIES = ("commitlog", "consumequeue", "batchconsumequeue", "index", "checkpoint", "config")


def is_store(path: str) -> bool:
    """A directory holding at least one of a store's files."""
    return any(os.path.exists(os.path.join(path, e)) for e in STORE_ENTRIES)


def require_store(path: str) -> None:
    """A directory holding none of a store's files is not a store: say so, naming what a store has, rather
    than answer "no topics" or "the store is sound" about /etc."""
    if not os.path.isdir(path):
        fail(f"{path}: " + ("not a directory" if os.path.exists(path) else "no store directory here"))
    if not is_store(path):
        fail(
            f"{path}: not a RocketMQ store: it has none of commitlog/, consumequeue/, batchconsumequeue/, "
            "index/, config/ or checkpoint"
        )


class _Cli(click.Group):
    """The command group: -h as well as --help, and usage errors as one line (the README's promise):
    "rocketstore: error: ...", exit status 2 (click's status for usage errors)."""

    def main(self, *args, **kwargs):
        kwargs["standalone_mode"] = False
        try:
            rv = super().main(*args, **kwargs)
            sys.stdout.flush()
        except BrokenPipeError:  # wherever it comes from: a table, JSON Lines, a body
            end_quietly()
        except click.exceptions.Abort:
            click.echo("rocketstore: aborted", err=True)
            sys.exit(1)
        except click.ClickException as e:
            hint = ""
            ctx = getattr(e, "ctx", None)
            if isinstance(e, click.UsageError) and ctx is not None:
                hint = f" (see '{ctx.command_path} -h')"
            click.echo(f"rocketstore: error: {' '.join(e.format_message().split())}{hint}", err=True)
            sys.exit(e.exit_code)
        sys.exit(rv if isinstance(rv, int) else 0)

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except BrokenPipeError:  # before click's main turns it into exit status 1
            end_quietly()


@click.group(cls=_Cli, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="rocketstore", message=f"%(prog)s %(version)s, engine: {engine.describe()}")
def cli():
    """Tools for Apache RocketMQ store directories (rocketstore)."""


@cli.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--kind", type=click.Choice(D.KINDS), help="The file's kind, when its place does not say it.")
@click.option("--limit", type=click.IntRange(min=0, max=O.JAVA_LONG_MAX), default=None, help="At most this many rows.")
@click.option("--skip", type=click.IntRange(min=0, max=O.JAVA_LONG_MAX), default=0, help="Skip this many rows first.")
@click.option(
    "--wide",
    is_flag=True,
    help="Every field as a column (by default a table shows the columns that "
    "fit a terminal; --json always has every field).",
)
@click.option(
    "--bodies",
    "--print-data-log",
    "bodies",
    is_flag=True,
    help="CommitLog records' bodies too: text when they are UTF-8, else hex (tables) or base64 "
    "(--json, with bodyEncoding).",
)
@click.option(
    "--hash-slots",
    type=click.IntRange(min=1, max=O.JAVA_LONG_MAX),
    default=None,
    help="maxHashSlotNum of an index file "
    "(default: from broker.conf, else inferred when maxIndexNum = 4 x maxHashSlotNum).",
)
@click.option("-c", "--conf", type=click.Path(dir_okay=False), help="A RocketMQ broker.conf.")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help='JSON Lines: one object per record (a header first, for index files and the checkpoint, as {"header": ...}).',
)
def dump(file, kind, limit, skip, wide, bodies, hash_slots, conf, as_json):
    """Decode one store file: a CommitLog segment, a ConsumeQueue or batch ConsumeQueue file, an index
    file or the checkpoint, with offsets (like Kafka's kafka-dump-log). Rows are printed as they are
    decoded: tables page by page, --json as JSON Lines."""
    if not os.path.isfile(file):
        fail(f"{file}: no such file")
    kind = kind or D.kind_of(file)
    if kind is None:
        fail(f"{file}: cannot tell what kind of store file this is; say it with --kind")
    if bodies and kind != "commitlog":
        fail("--bodies is for CommitLog segments (the other files hold no bodies)")
    header = None
    try:
        if kind == "checkpoint":
            header, rows = D.checkpoint_header(file), iter(())
        elif kind == "index":
            slots = hash_slots or _hash_slots(file, load_config(conf) if conf else None)
            header, rows = D.index_header(file, slots), D.index_rows(file, slots)
        elif kind == "commitlog":
            rows = D.commitlog_rows(file, bodies=bodies)
        else:
            rows = getattr(D, f"{kind}_rows")(file)
        stop = None if limit is None else skip + limit  # beyond sys.maxsize (islice's bound): no file has as many
        rows = itertools.islice(rows, skip, None if stop is None or stop > sys.maxsize else stop)
        if as_json:
            if header is not None:
                O.echo_json({"header": header})
            O.print_json_lines(D.json_body(r) for r in rows)
        else:
            out = O.console()
            title = f"{kind} {file}"
            if header is not None:
                O.print_header(title, header, out)
                title = None
            columns = None if wide else D.TABLE_COLUMNS.get(kind)
            if bodies:
                n = O.print_records(
                    title, (D.text_body(r) for r in rows), [*(columns or D.COMMITLOG_FIELDS), "body"], out
                )
            else:
                n = O.print_table(title, (D.text_body(r) for r in rows), columns, out, wide=wide)
            if n == 0 and header is None:
                out.print(f"{title}: nothing written")
    except (CorruptDataError, OSError, ValueError) as e:
        sys.stdout.flush()
        fail(f"{file}: {e}")


def _hash_slots(path: str, cfg: StoreConfig | None) -> int:
    size = os.path.getsize(path)
    if cfg is not None and cfg.max_hash_slot_num is not None and cfg.max_index_num is not None:
        if IX.file_size(cfg.max_hash_slot_num, cfg.max_index_num) != size:
            fail(
                f"{path}: {size} bytes does not match maxHashSlotNum={cfg.max_hash_slot_num}, "
                f"maxIndexNum={cfg.max_index_num}"
            )
        return cfg.max_hash_slot_num
    if size > IX.HEADER_SIZE and (size - IX.HEADER_SIZE) % 84 == 0:
        return (size - IX.HEADER_SIZE) // 84
    fail(f"{path}: cannot infer the index sizes from {size} bytes; give --hash-slots or -c broker.conf")


@cli.command()
@click.argument("store", type=click.Path(file_okay=False))
@click.option("-c", "--conf", type=click.Path(dir_okay=False), help="A RocketMQ broker.conf.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
@O.wide_option
def inspect(store, conf, as_json, wide):
    """A whole store at a glance: topics and queues, files and their fill, disk use, the checkpoint, the
    abort state and how far dispatch is behind. Opens the store read-only."""
    require_store(store)
    try:
        with open_store(store, load_config(conf), read_only=True) as s:
            report = inspect_store(s)
    except RocketStoreError as e:
        fail(str(e))
    if as_json:
        click.echo(json.dumps(report, ensure_ascii=False))
        return
    print_result(f"store {report['root']}", report["summary"], [], False)
    print_result("files", None, report["files"], False, wide)
    print_result("queues", None, report["queues"], False, wide)
    print_result("checkpoint file (its own bytes, as written)", report["checkpoint"], [], False)


@cli.command()
@click.argument("store", type=click.Path(exists=True, file_okay=False))
@click.option(
    "-c",
    "--conf",
    type=click.Path(exists=True, dir_okay=False),
    help="A RocketMQ broker.conf "
    "(file sizes, enabledAppendPropCRC, messageDelayLevel); sizes are inferred from the files otherwise.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
@O.wide_option
def verify(store, conf, as_json, wide):
    """Check every CommitLog record (structure, CRCs, BLANK fillers), every ConsumeQueue and batch
    ConsumeQueue unit against its record, every index entry and the checkpoint. Reads the files directly,
    changing nothing. Exit status 0 when the store is sound, 1 when problems were found."""
    from ..maintenance import verify as V

    require_store(store)
    try:
        cfg = StoreConfig.from_properties(conf) if conf else StoreConfig()
    except (OSError, ValueError) as e:
        raise click.BadParameter(str(e), param_hint="-c/--conf") from None
    warn_unknown_keys(conf)
    try:
        report = _verify_with_progress(V, store, cfg)
    except (OSError, RocketStoreError) as e:
        fail(f"{store}: {e}")
    if as_json:
        click.echo(json.dumps(report, ensure_ascii=False))
    else:
        _print_verify(report, wide)
    sys.exit(0 if report["ok"] else 1)


def _verify_with_progress(V, store, cfg):
    """verify_store with a bar on stderr when it is a terminal, by bytes of CommitLog checked (then the
    queues and the index), whatever the store's size: a small store takes seconds too."""
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeElapsedColumn

    err = O.console(stderr=True)
    with Progress(
        TextColumn("verifying {task.description}"),
        BarColumn(),
        DownloadColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    ) as bar:
        task = bar.add_task("commitlog", total=None)

        def progress(kind, done, total):
            if kind == "commitlog":
                bar.update(task, completed=done, total=total)
            else:
                bar.update(task, description=kind)

        return V.verify_store(store, cfg, progress)


def _print_verify(report: dict, wide: bool = False) -> None:
    console = O.console()
    O.print_header(
        f"verify {report['root']}",
        {
            **report["checked"],
            "commitLogMinOffset": report["commitLog"]["minOffset"],
            "commitLogMaxOffset": report["commitLog"]["maxOffset"],
            "problems": len(report["problems"]),
        },
        console,
    )
    for n in report["notes"]:
        console.print(f"note: {n}", soft_wrap=True)
    if report["problems"]:
        print_result("problems", None, report["problems"], False, wide)
        console.print(f"{len(report['problems'])} problem(s) found", style="bold red")
    else:
        console.print("the store is sound", style="bold green")


from .commands import register as _register_commands  # noqa: E402  produce, consume, query, topics, queues

_register_commands(cli)
from .admin import register as _register_admin  # noqa: E402  groups, group ..., topic ...

_register_admin(cli)
from .maintain import register as _register_maintenance  # noqa: E402  rebuild, clean, recover

_register_maintenance(cli)
from .archive import register as _register_archive  # noqa: E402  archive (Spark)

_register_archive(cli)

from .serve import register as _register_serve  # noqa: E402  serve (gRPC, RocketMQ 5 clients)

_register_serve(cli)
from .web_console import register as _register_console  # noqa: E402  console (the web console, read-only)

_register_console(cli)


# `rocketstore CMD -h` ends with examples for the commands people run first. "\b" keeps a paragraph's line
# breaks (click rewraps every other paragraph).
EXAMPLES = {
    "produce": [
        "rocketstore produce ./store Orders hi --create --small   # ~17 MiB on disk",
        "rocketstore produce ./store Orders hi --create   # RocketMQ's sizes: 1.4 GB",
        'rocketstore produce ./store Orders hi --tags TagA --keys "k1 k2"',
        "seq 100 | rocketstore produce ./store Orders --stdin   # a message a line",
    ],
    "consume": [
        "rocketstore consume ./store Orders   # from the earliest, commits nothing",
        "rocketstore consume ./store Orders -g g1 --max 100   # then commits g1",
        "rocketstore consume ./store Orders -q 0 --offset 100   # one queue",
        "rocketstore consume ./store Orders --json | jq .body   # JSON Lines",
    ],
    "query": [
        "rocketstore query ./store --key order-1 --topic Orders",
        "rocketstore query ./store --msg-id 7F00000100002A9F0000000000000000",
        "rocketstore query ./store --begin 2026-11-22T08:00:00Z --max 10",
    ],
    "inspect": [
        "rocketstore inspect ./store",
        "rocketstore inspect ./store --wide   # every column, long lines",
        "rocketstore inspect ./store --json | jq .checkpoint",
    ],
    "verify": [
        "rocketstore verify ./store   # exit 0: sound (notes say what is behind)",
        "rocketstore verify ./store -c broker.conf --json",
    ],
    "topics": [
        "rocketstore topics ./store",
        "rocketstore topics ./store --json | jq -r '.rows[].topic'",
    ],
    "groups": [
        "rocketstore groups ./store   # every group and its total lag",
        "rocketstore group progress ./store g1   # the lag per queue",
    ],
    "serve": [
        "rocketstore serve ./store   # gRPC 127.0.0.1:8081, 9876, 10911",
        "rocketstore serve ./store --listen 0.0.0.0:8081 --no-remoting",
        "rocketstore serve ./store --http 0.0.0.0:8082   # /metrics, the console",
    ],
    "console": [
        "rocketstore console ./store   # http://127.0.0.1:8082/, read-only",
        "rocketstore console ./store --http 0.0.0.0:8090 --refresh 2",
    ],
    "rebuild": [
        "rocketstore rebuild ./store --dry-run   # what, and the room needed",
        "rocketstore rebuild ./store --yes",
        "rocketstore rebuild ./store --yes --engine spark",
    ],
    "archive": [
        "rocketstore archive ./store --to ./archive   # closed segments, each once",
        "rocketstore archive ./store --to ./archive --include-system --include-prepared",
        "rocketstore archive ./store --to ./archive --json   # then: spark.read.parquet('archive')",
        "rocketstore archive ./store --to ./archive --watch   # until Ctrl-C / SIGTERM",
    ],
    "clean": [
        "rocketstore clean ./store --dry-run   # what would go, why the rest stays",
        "rocketstore clean ./store",
        "rocketstore clean ./store -c broker.conf   # with fileReservedTime=1 (h)",
    ],
}


def _add_examples(group: click.Group) -> None:
    for name, lines in EXAMPLES.items():
        group.commands[name].epilog = "\b\nExamples:\n" + "\n".join(f"  {line}" for line in lines)


_add_examples(cli)


def main() -> None:
    cli(prog_name="rocketstore")
