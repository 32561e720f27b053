"""`rocketstore serve STORE`: a gRPC endpoint (apache.rocketmq.v2.MessagingService) over one store."""
from __future__ import annotations

import sys

import click

from .. import StoreConfig
from ..errors import RocketStoreError


@click.command()
@click.argument("store_arg", metavar="[STORE]", required=False, type=click.Path(file_okay=False))
@click.option("--store", "store", type=click.Path(file_okay=False),
              help="The store directory (created if missing), opened for writing; or give it as STORE.")
@click.option("--listen", default="127.0.0.1:8081", show_default=True, help="HOST:PORT to listen on.")
@click.option("-c", "--conf", type=click.Path(exists=True, dir_okay=False),
              help="A broker.conf: the store's settings, and the proxy's (brokerName, maxMessageSize, "
                   "minInvisibleTimeMillsForRecv, grpcClientConsumerMin/MaxLongPollingTimeoutMillis, retryMaxTimes, "
                   "authenticationEnabled + initAuthenticationUser, ...).")
@click.option("--access-key", "access_keys", multiple=True, metavar="AK",
              help="Require authentication: an access key clients may sign with (repeatable, each with a "
                   "--secret-key, in order).")
@click.option("--secret-key", "secret_keys", multiple=True, metavar="SK", help="The secret key of each --access-key.")
@click.option("--access-keys-file", type=click.Path(exists=True, dir_okay=False),
              help="Require authentication: access keys from a file, JSON ({\"AK\": \"SK\", ...} or "
                   "[{\"accessKey\": .., \"secretKey\": ..}]) or properties (AK=SK per line).")
def serve(store_arg, store, listen, conf, access_keys, secret_keys, access_keys_file):
    """Serve a store to RocketMQ 5 clients over gRPC (QueryRoute, Heartbeat, Telemetry, SendMessage,
    ReceiveMessage, AckMessage, ChangeInvisibleDuration, QueryAssignment, ForwardMessageToDeadLetterQueue,
    NotifyClientTermination). Unacked messages come back through %RETRY%<group>_<topic> and end in
    %DLQ%<group> after the max attempts. With access keys, requests that do not verify (RocketMQ 5's
    HMAC-SHA1 signature) are refused as UNAUTHORIZED. Stops cleanly on SIGINT/SIGTERM."""
    if (store_arg is None) == (store is None):
        raise click.UsageError("give the store directory once: as STORE (like every command) or --store")
    store = store or store_arg
    try:
        from ..serve.server import parse_listen, serve_forever
    except ImportError as e:
        click.echo(f"rocketstore: error: serve needs grpcio, protobuf and rocketmq-python-client: {e}", err=True)
        sys.exit(1)
    try:
        parse_listen(listen)
        cfg = StoreConfig.from_properties(conf) if conf else StoreConfig()
        keys = _access_keys(access_keys, secret_keys, access_keys_file)
        from ..serve.auth import keys_from_broker_conf
        keys_from_broker_conf(cfg.extra)       # a bad authentication setting in broker.conf fails here
    except (OSError, ValueError) as e:
        click.echo(f"rocketstore: error: {e}", err=True)
        sys.exit(1)
    try:
        serve_forever(store, listen, cfg, echo=click.echo, access_keys=keys)
    except (OSError, RocketStoreError, RuntimeError) as e:
        click.echo(f"rocketstore: error: {e}", err=True)
        sys.exit(1)


def _access_keys(access_keys, secret_keys, path) -> dict[str, str]:
    if len(access_keys) != len(secret_keys):
        raise ValueError("each --access-key needs a --secret-key (and the other way round)")
    keys: dict[str, str] = {}
    if path:
        from ..serve.auth import load_keys_file
        keys.update(load_keys_file(path))
    for ak, sk in zip(access_keys, secret_keys):
        if not ak.strip():
            raise ValueError("--access-key cannot be blank")
        keys[ak] = sk
    return keys


def register(cli) -> None:
    cli.add_command(serve)
