"""`rocketstore console STORE`: the web console over a store opened read-only (live or not), without serving
RocketMQ's protocols: the pages of `rocketstore serve`'s HTTP side, where nothing can change the store."""

from __future__ import annotations

import signal
import sys
import threading

import click

from ..errors import RocketStoreError
from . import main as M
from .options import conf_opt, store_arg
from .serve import DEFAULT_HTTP


@click.command(name="console")
@store_arg
@click.option(
    "--http",
    default=DEFAULT_HTTP,
    show_default=True,
    metavar="HOST:PORT",
    help="Where the console's pages are served.",
)
@click.option(
    "--refresh",
    type=click.FloatRange(min=0.5),
    default=5.0,
    show_default=True,
    metavar="SECONDS",
    help="Open the store again (read-only) when the last open is older: another process's writes show up.",
)
@conf_opt
def console(store, http, refresh, conf):
    """The web console (overview, topics, consumer groups, messages, health) over a store opened read-only: a
    live store (another process writing it) included, and nothing written. Stops on Ctrl-C or SIGTERM."""
    from ..broker.address import parse_host_port

    try:
        host, port = parse_host_port(http, "--http")
    except ValueError as e:
        raise click.UsageError(str(e)) from None
    M.require_store(store)
    cfg = M.load_config(conf)
    try:
        from ..broker.address import check_bindable
        from ..console.source import Hooks, ReadOnlySource
        from ..console.web import Console, HttpSide

        check_bindable(host, port)
        source = ReadOnlySource(store, cfg, refresh)
    except ImportError as e:
        M.fail(f"the console needs prometheus-client and jinja2: {e}")
    except (OSError, RocketStoreError) as e:
        M.fail(str(e))
    side = HttpSide(host, port, Console(source, Hooks(), None, cfg))
    stop = threading.Event()
    previous = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            side.start()
        except OSError as e:
            M.fail(f"{http}: {e.strerror or e}")
        with source.store() as s:
            root = s.root
        click.echo(f"rocketstore console: store {root} (read-only), on {side.url()}")
        sys.stdout.flush()
        while not stop.wait(0.5):
            pass
    finally:
        side.stop()
        source.close()
        for s, h in previous.items():
            signal.signal(s, h)
    click.echo("rocketstore console: stopped")


def register(cli) -> None:
    cli.add_command(console)
