"""`rocketstore serve STORE`: a gRPC endpoint (apache.rocketmq.v2.MessagingService) over one store."""

from __future__ import annotations

import dataclasses
import logging
import os
import sys

import click

from .. import StoreConfig
from ..errors import RocketStoreError

DEFAULT_HTTP = "127.0.0.1:8082"


@click.command()
@click.argument("store_arg", metavar="[STORE]", required=False, type=click.Path(file_okay=False))
@click.option(
    "--store",
    "store",
    type=click.Path(file_okay=False),
    help="The store directory (created if missing or empty), opened for writing; or give it as STORE.",
)
@click.option(
    "--listen",
    default="127.0.0.1:8081",
    show_default=True,
    metavar="HOST:PORT",
    help="HOST:PORT to listen on (0.0.0.0:PORT or [::]:PORT: every interface).",
)
@click.option(
    "--advertise",
    metavar="HOST:PORT",
    help="The address QueryRoute gives clients to send and receive at (like brokerIP1 and "
    "grpcServerPort): default the --listen address; for a wildcard one, this machine's address, "
    "with a warning.",
)
@click.option(
    "--namesrv",
    default="127.0.0.1:9876",
    show_default=True,
    metavar="HOST:PORT",
    help="HOST:PORT of the name server RocketMQ 4.x clients and mqadmin ask for routes (remoting protocol).",
)
@click.option(
    "--remoting",
    default="127.0.0.1:10911",
    show_default=True,
    metavar="HOST:PORT",
    help="HOST:PORT of the broker RocketMQ 4.x clients send to and pull from (remoting protocol).",
)
@click.option(
    "--remoting-advertise",
    metavar="HOST:PORT",
    help="The broker address the name server's routes give (brokerIP1 and listenPort): default the --remoting "
    "address; for a wildcard one, this machine's address.",
)
@click.option(
    "--namesrv-addr",
    metavar="HOST:PORT[;HOST:PORT]",
    help="Name servers (RocketMQ's or another serve's) the broker registers with over remoting, as broker.conf's "
    "namesrvAddr (which this overrides): one broker of a cluster. Usually with --no-namesrv.",
)
@click.option(
    "--http",
    metavar="HOST:PORT",
    help=f"HOST:PORT of the HTTP side: GET /metrics (Prometheus, RocketMQ's metric names) and the web console "
    f"[default: {DEFAULT_HTTP}; when that default port is taken, serve warns and goes on without it].",
)
@click.option("--no-http", is_flag=True, help="Leave out the HTTP side (--http): no /metrics, no console.")
@click.option(
    "--archive",
    metavar="DEST",
    help="Cleanup waits for the archive at DEST (`rocketstore archive STORE --to DEST`): no CommitLog segment is "
    "deleted before DEST holds it, as broker.conf's archiveEnable=true with archivePath=DEST.",
)
@click.option("--no-grpc", is_flag=True, help="Leave out the gRPC endpoint (--listen).")
@click.option("--no-remoting", is_flag=True, help="Leave out the remoting broker (--remoting).")
@click.option("--no-namesrv", is_flag=True, help="Leave out the name server (--namesrv).")
@click.option(
    "-v",
    "--verbose",
    count=True,
    help="-v: the request log (each client when it appears, its calls by kind every --log-interval) "
    "and other INFO lines on stderr; -vv: DEBUG.",
)
@click.option(
    "--log-level",
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
    help="The level of rocketstore's log on stderr (default WARNING; overrides -v).",
)
@click.option(
    "--log-interval",
    type=click.FloatRange(min=0.1),
    default=60.0,
    show_default=True,
    metavar="SECONDS",
    help="How often the request log sums up each client's calls.",
)
@click.option(
    "-c",
    "--conf",
    type=click.Path(exists=True, dir_okay=False),
    help="A broker.conf: the store's settings, and the proxy's (brokerName, maxMessageSize, "
    "minInvisibleTimeMillsForRecv, grpcClientConsumerMin/MaxLongPollingTimeoutMillis, retryMaxTimes, "
    "authenticationEnabled + initAuthenticationUser, ...).",
)
@click.option(
    "--access-key",
    "access_keys",
    multiple=True,
    metavar="AK",
    help="Require authentication: an access key clients may sign with (repeatable, each with a "
    "--secret-key, in order).",
)
@click.option("--secret-key", "secret_keys", multiple=True, metavar="SK", help="The secret key of each --access-key.")
@click.option(
    "--access-keys-file",
    type=click.Path(exists=True, dir_okay=False),
    help='Require authentication: access keys from a file, JSON ({"AK": "SK", ...} or '
    '[{"accessKey": .., "secretKey": ..}]) or properties (AK=SK per line).',
)
@click.option(
    "--acl",
    "acl_paths",
    multiple=True,
    type=click.Path(exists=True),
    metavar="FILE",
    help="Check the remoting requests (broker and name server) against a RocketMQ plain_acl.yml (or a directory "
    "of them, like conf/acl/): AccessKey + HMAC-SHA1 Signature, topic and group permissions. Repeatable. "
    "broker.conf's aclEnable=true reads plain_acl.yml (and acl/) beside the broker.conf.",
)
def serve(
    store_arg,
    store,
    listen,
    advertise,
    namesrv,
    remoting,
    remoting_advertise,
    namesrv_addr,
    http,
    no_http,
    archive,
    no_grpc,
    no_remoting,
    no_namesrv,
    verbose,
    log_level,
    log_interval,
    conf,
    access_keys,
    secret_keys,
    access_keys_file,
    acl_paths,
):
    """Serve a store to RocketMQ clients: RocketMQ 5 clients over gRPC (--listen), RocketMQ 4.x clients and
    mqadmin over the remoting protocol (a name server on --namesrv, a broker on --remoting registered in it);
    all three by default, --no-grpc / --no-remoting / --no-namesrv leave one out. With --namesrv-addr (or
    broker.conf's namesrvAddr) the broker registers with those name servers too: one broker of a cluster. gRPC: (QueryRoute, Heartbeat, Telemetry, SendMessage,
    ReceiveMessage, AckMessage, ChangeInvisibleDuration, QueryAssignment, ForwardMessageToDeadLetterQueue,
    NotifyClientTermination). Unacked messages come back through %RETRY%<group>_<topic> and end in
    %DLQ%<group> after the max attempts. ReceiveMessage needs an invisible time of at least
    minInvisibleTimeMillsForRecv (10 s; auto_renew receives get defaultInvisibleTimeMills). With access keys,
    requests that do not verify (RocketMQ 5's HMAC-SHA1 signature) are refused as UNAUTHORIZED. With --acl (or
    aclEnable=true), remoting requests are checked as RocketMQ's plain ACL does (refused with SYSTEM_ERROR and
    an AclException remark). HTTP (--http, 127.0.0.1:8082): /metrics for Prometheus and the web console.
    Stops cleanly on SIGINT/SIGTERM."""
    if (store_arg is None) == (store is None):
        raise click.UsageError("give the store directory once: as STORE (like every command) or --store")
    store = store or store_arg
    _logging(log_level or ("DEBUG" if verbose >= 2 else "INFO" if verbose == 1 else "WARNING"))
    # gRPC's C core logs its own failures (a port in use: "E... add_port.cc ...") before the error we give;
    # GRPC_VERBOSITY=ERROR or debug in the environment brings them back
    os.environ.setdefault("GRPC_VERBOSITY", "NONE")
    try:
        from ..broker.address import parse_advertise, parse_host_port
        from ..grpc.server import parse_listen
        from .server import serve_forever
    except ImportError as e:
        click.echo(f"rocketstore: error: serve needs grpcio, protobuf and rocketmq-python-client: {e}", err=True)
        sys.exit(1)
    if no_grpc and no_remoting and no_namesrv:
        raise click.UsageError("--no-grpc, --no-remoting and --no-namesrv together leave nothing to serve")
    try:  # a bad address is a usage error (exit status 2, with the pointer to -h), as the README says
        parse_listen(listen)
        if advertise:
            parse_advertise(advertise)
        parse_host_port(namesrv, "--namesrv")
        parse_host_port(remoting, "--remoting")
        if remoting_advertise:
            try:
                parse_advertise(remoting_advertise)
            except ValueError as e:
                raise ValueError(str(e).replace("--advertise", "--remoting-advertise", 1)) from None
    except ValueError as e:
        raise click.UsageError(str(e)) from None
    http_optional = http is None and not no_http  # the default address: a warning if taken
    http = _http_address(http, no_http)
    if namesrv_addr is not None:
        if no_remoting:
            raise click.UsageError(
                "--namesrv-addr is where the broker registers: it needs the broker (not --no-remoting)"
            )
        _check_namesrv_addr(namesrv_addr, "--namesrv-addr", usage=True)
    _check_store_dir(store)
    try:
        cfg = StoreConfig.from_properties(conf) if conf else StoreConfig()
        cfg = _with_archive(cfg, archive)
        if not no_remoting:
            from ..remoting.broker import BrokerSettings

            BrokerSettings.from_extra(cfg.extra)  # a broker setting that is no number fails here, named
        if not namesrv_addr and (cfg.extra or {}).get("namesrvAddr"):
            _check_namesrv_addr(str(cfg.extra["namesrvAddr"]), f"{conf}: namesrvAddr")
        _warn_unknown_keys(conf)
        keys = _access_keys(access_keys, secret_keys, access_keys_file)
        from ..grpc.auth import keys_from_broker_conf

        keys_from_broker_conf(cfg.extra)  # a bad authentication setting in broker.conf fails here
        remoting_acl = _remoting_acl(acl_paths, conf, cfg.extra)
    except (OSError, ValueError) as e:
        click.echo(f"rocketstore: error: {e}", err=True)
        sys.exit(1)
    try:
        serve_forever(
            store,
            listen,
            cfg,
            echo=click.echo,
            access_keys=keys,
            advertise=advertise,
            request_log_interval=log_interval,
            grpc_enabled=not no_grpc,
            namesrv=None if no_namesrv else namesrv,
            remoting=None if no_remoting else remoting,
            remoting_advertise=remoting_advertise,
            remoting_acl=remoting_acl,
            namesrv_addr=namesrv_addr,
            http=http,
            http_optional=http_optional,
        )
    except (OSError, RocketStoreError, RuntimeError) as e:
        click.echo(f"rocketstore: error: {e}", err=True)
        sys.exit(1)


def _with_archive(cfg: StoreConfig, archive: str | None) -> StoreConfig:
    """--archive DEST: archiveEnable with archivePath DEST (a local path: the manifest is read with file I/O)."""
    from ..errors import ArchiveError
    from ..files.archive_manifest import local_dest

    if archive is None:
        return cfg
    try:
        return dataclasses.replace(cfg, archive_enable=True, archive_path=local_dest(archive))
    except ArchiveError as e:
        raise click.BadParameter(str(e), param_hint="'--archive'") from None


def _http_address(http: str | None, no_http: bool) -> str | None:
    """--http as given (a bad one a usage error), None with --no-http, else the default (which serve checks with
    the other ports: taken by another process, a second serve on the machine say, it is a warning and serve goes
    on without the HTTP side; a --http given is held to)."""
    from ..broker.address import parse_host_port

    if http is not None:
        if no_http:
            raise click.UsageError("--http and --no-http together: give one")
        try:
            parse_host_port(http, "--http")
        except ValueError as e:
            raise click.UsageError(str(e)) from None
        return http
    return None if no_http else DEFAULT_HTTP


def _check_namesrv_addr(text: str, what: str, usage: bool = False) -> None:
    """A bad name server list is a usage error on the command line (exit 2), an error in broker.conf (exit 1)."""
    from ..remoting.broker.registration import parse_namesrv_addr

    try:
        parse_namesrv_addr(text, what)
    except ValueError as e:
        if usage:
            raise click.UsageError(str(e)) from None
        raise


def _warn_unknown_keys(conf) -> None:
    from . import main as M

    M.warn_unknown_keys(conf)


def _check_store_dir(store: str) -> None:
    """serve makes a store where there is none (a missing or empty directory); a directory holding other
    files than a store's is refused rather than filled with one."""
    from . import main as M

    if os.path.exists(store) and not (os.path.isdir(store) and not os.listdir(store)):
        M.require_store(store)


def _logging(level: str) -> None:
    """rocketstore's log (the request log, warnings) to stderr, one line per record."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger("rocketstore")
    logger.setLevel(level.upper())
    logger.addHandler(handler)
    logger.propagate = False


def _access_keys(access_keys, secret_keys, path) -> dict[str, str]:
    if len(access_keys) != len(secret_keys):
        raise ValueError("each --access-key needs a --secret-key (and the other way round)")
    keys: dict[str, str] = {}
    if path:
        from ..grpc.auth import load_keys_file

        keys.update(load_keys_file(path))
    for ak, sk in zip(access_keys, secret_keys):
        if not ak.strip():
            raise ValueError("--access-key cannot be blank")
        keys[ak] = sk
    return keys


def _remoting_acl(paths, conf, extra):
    """The plain ACL of the remoting side: --acl files, else with broker.conf's aclEnable=true the
    plain_acl.yml and acl/ beside the broker.conf (RocketMQ's conf/plain_acl.yml and conf/acl/); None: no ACL."""
    from ..remoting.acl_files import load_plain_acl

    if not paths and str((extra or {}).get("aclEnable", "false")).strip().lower() == "true":
        here = os.path.dirname(os.path.abspath(conf))
        paths = [p for p in (os.path.join(here, "plain_acl.yml"), os.path.join(here, "acl")) if os.path.exists(p)]
        if not paths:
            raise ValueError(f"aclEnable=true in {conf}, but no plain_acl.yml or acl/ beside it: give --acl FILE")
    return load_plain_acl(*paths) if paths else None


def register(cli) -> None:
    cli.add_command(serve)
