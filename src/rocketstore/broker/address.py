"""The addresses of `serve`: where it listens (--listen), and what its routes tell clients to connect to
(--advertise, like the broker's brokerIP1 plus the proxy's grpcServerPort).

A client connects to the endpoint it was given, asks QueryRoute, then sends and receives at the address
in the route. A wildcard listen address (0.0.0.0, [::]) is no address to connect to, so without
--advertise the routes name this machine's own address, as RocketMQ's NetworkUtil.getLocalAddress
picks brokerIP1: a non-loopback address, else loopback."""

from __future__ import annotations

import ipaddress
import os
import socket

from ..errors import RocketStoreError


class ListenError(RocketStoreError, OSError):
    """The listen address cannot be bound (in use, not this machine's, not permitted)."""


def parse_host_port(text: str, option: str = "--listen") -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"{option} {text!r}: expected HOST:PORT")
    host = host.strip("[]") or "127.0.0.1"
    p = int(port)
    if not 0 <= p <= 65535:
        raise ValueError(f"{option} {text!r}: port out of range")
    return host, p


def parse_advertise(text: str) -> tuple[str, int]:
    """--advertise HOST:PORT: an address clients can connect to, so neither a wildcard nor port 0."""
    host, port = parse_host_port(text, "--advertise")
    if is_wildcard(host):
        raise ValueError(f"--advertise {text!r}: {host} is no address a client can connect to")
    if port == 0:
        raise ValueError(f"--advertise {text!r}: give the port clients connect to")
    return host, port


def is_wildcard(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


def join(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def check_bindable(host: str, port: int) -> None:
    """Bind the listen address once ourselves (SO_REUSEADDR, as gRPC binds) so that an address in use is
    one clear ListenError, named, before the store is opened; gRPC's own failure is a core log line and a
    RuntimeError that does not say why."""
    if port == 0:
        return
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as e:
        raise ListenError(f"{join(host, port)}: {str(e.strerror).lower()}") from None
    failure = None
    for family, kind, proto, _, sockaddr in infos:
        with socket.socket(family, kind, proto) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(sockaddr)
                return  # gRPC listens when at least one resolved address binds
            except OSError as e:
                failure = failure or e
    if failure is not None:
        why = os.strerror(failure.errno).lower() if failure.errno else str(failure)
        error = ListenError(f"{join(host, port)}: {why}")
        error.errno = failure.errno
        raise error


def local_address() -> str:
    """This machine's address for clients elsewhere: the source address of the default route (what other
    machines see), else a non-loopback address of the host name, else 127.0.0.1. Nothing is sent."""
    for family, probe in ((socket.AF_INET, "192.0.2.1"), (socket.AF_INET6, "2001:db8::1")):  # TEST-NETs
        try:
            with socket.socket(family, socket.SOCK_DGRAM) as s:
                s.connect((probe, 9))  # UDP connect: only a route lookup
                addr = s.getsockname()[0]
        except OSError:
            continue
        if not ipaddress.ip_address(addr).is_loopback and not is_wildcard(addr):
            return addr
    try:
        infos = socket.getaddrinfo(socket.gethostname(), None, type=socket.SOCK_STREAM)
    except OSError:
        infos = []
    for family, _, _, _, sockaddr in sorted(infos, key=lambda i: i[0] != socket.AF_INET):  # IPv4 first
        addr = sockaddr[0]
        if not ipaddress.ip_address(addr.split("%")[0]).is_loopback:
            return addr
    return "127.0.0.1"


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on at `host` now (the kernel's pick): for a server, a test or a benchmark that
    must name its port before it starts (a broker writes its own address into the records)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def free_port_pair(host: str = "127.0.0.1") -> int:
    """A free port p with p - 2 free too: a remoting broker listens on p and on its fast channel, p - 2
    (BrokerController's fastRemotingServer)."""
    for _ in range(50):
        p = free_port(host)
        if p <= 1026:
            continue
        with socket.socket() as s:
            try:
                s.bind((host, p - 2))
            except OSError:
                continue
        return p
    raise ListenError(f"{host}: no free port p with p - 2 free after 50 tries")
