"""`rocketstore serve STORE`: a gRPC endpoint (apache.rocketmq.v2.MessagingService) over one store."""
from __future__ import annotations

import sys

import click

from .. import StoreConfig
from ..errors import RocketStoreError


@click.command()
@click.option("--store", "store", required=True, type=click.Path(file_okay=False),
              help="The store directory (created if missing), opened for writing.")
@click.option("--listen", default="127.0.0.1:8081", show_default=True, help="HOST:PORT to listen on.")
@click.option("-c", "--conf", type=click.Path(exists=True, dir_okay=False),
              help="A broker.conf: the store's settings, and the proxy's (brokerName, maxMessageSize, "
                   "minInvisibleTimeMillsForRecv, grpcClientConsumerMin/MaxLongPollingTimeoutMillis, ...).")
def serve(store, listen, conf):
    """Serve a store to RocketMQ 5 clients over gRPC (QueryRoute, Heartbeat, Telemetry, SendMessage,
    ReceiveMessage, AckMessage, ChangeInvisibleDuration, NotifyClientTermination). Stops cleanly on
    SIGINT/SIGTERM."""
    try:
        from ..serve.server import parse_listen, serve_forever
    except ImportError as e:
        click.echo(f"rocketstore: error: serve needs grpcio, protobuf and rocketmq-python-client: {e}", err=True)
        sys.exit(1)
    try:
        parse_listen(listen)
        cfg = StoreConfig.from_properties(conf) if conf else StoreConfig()
    except (OSError, ValueError) as e:
        click.echo(f"rocketstore: error: {e}", err=True)
        sys.exit(1)
    try:
        serve_forever(store, listen, cfg, echo=click.echo)
    except (OSError, RocketStoreError, RuntimeError) as e:
        click.echo(f"rocketstore: error: {e}", err=True)
        sys.exit(1)


def register(cli) -> None:
    cli.add_command(serve)
