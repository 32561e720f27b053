"""Optional authentication, as RocketMQ 5's proxy does it for gRPC (DefaultAuthenticationContextBuilder +
DefaultAuthenticationHandler): the `authorization` header "MQv2-HMAC-SHA1 Credential=AK, SignedHeaders=
x-mq-date-time, Signature=HEX" must name a known access key and carry HEX(HMAC-SHA1(secret key,
x-mq-date-time)). A request that does not verify (no header, unknown key, bad signature) is answered with
Code.UNAUTHORIZED in the RPC's own response, as ResponseBuilder maps an AuthenticationException. With no keys
configured every request is accepted (authenticationEnabled=false, the proxy's default).

Keys come from `--access-key/--secret-key` pairs, from a file (JSON {"AK": "SK", ...} or [{"accessKey": ..,
"secretKey": ..}, ...]; or properties lines AK=SK) and from broker.conf's authenticationEnabled=true with
initAuthenticationUser={"username": .., "password": ..} (RocketMQ's ACL 2.0 bootstrap user)."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging

import grpc

from ..errors import RocketStoreError
from .protocol import definition_pb2 as pb
from .protocol import service_pb2 as spb

log = logging.getLogger("rocketstore.serve")
SERVICE = "apache.rocketmq.v2.MessagingService"


class AuthError(RocketStoreError):
    """A request whose authorization does not verify (answered with Code.UNAUTHORIZED)."""


def sign(secret_key: str, date_time: str) -> str:
    return hmac.new(secret_key.encode("utf-8"), date_time.encode("utf-8"), hashlib.sha1).hexdigest()


def verify(keys: dict[str, str], metadata: dict[str, str]) -> None:
    """Raise AuthError unless the metadata's authorization verifies against `keys` (access key -> secret)."""
    authorization = metadata.get("authorization")
    if not authorization:
        raise AuthError("username cannot be null.")
    date_time = metadata.get("x-mq-date-time")
    if not date_time:
        raise AuthError("datetime is null.")
    parts = authorization.split(" ", 1)
    if len(parts) != 2:
        raise AuthError("authentication header is incorrect.")
    username = signature = None
    for item in parts[1].split(","):
        kv = item.strip().split("=", 1)
        if len(kv) != 2:
            raise AuthError(f"authentication keyValues length is incorrect, actual length={len(kv)}.")
        if kv[0] == "Credential":
            username = kv[1].split("/")[0]
        elif kv[0] == "Signature":
            signature = kv[1]
    if not username:
        raise AuthError("username cannot be null.")
    secret = keys.get(username)
    if secret is None:
        raise AuthError(f"User:{username} is not found.")
    if signature is None or not hmac.compare_digest(sign(secret, date_time).lower(), signature.lower()):
        raise AuthError("check signature failed.")


def load_keys_file(path: str) -> dict[str, str]:
    """Access keys from a JSON file ({"AK": "SK"} or a list of {"accessKey", "secretKey"}) or a properties
    file (AK=SK per line, # comments)."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    stripped = text.strip()
    if stripped.startswith("{") or stripped.startswith("["):
        try:
            data = json.loads(stripped)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: not valid JSON: {e}") from None
        if isinstance(data, dict) and "accounts" in data:
            data = data["accounts"]
        if isinstance(data, dict):
            return {str(k): str(v) for k, v in data.items()}
        out = {}
        for item in data:
            ak = item.get("accessKey") or item.get("username")
            sk = item.get("secretKey") or item.get("password")
            if not ak or sk is None:
                raise ValueError(f"{path}: each account needs accessKey and secretKey")
            out[str(ak)] = str(sk)
        return out
    out = {}
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#") or line.startswith("!"):
            continue
        sep = min([i for i in (line.find("="), line.find(":")) if i >= 0], default=-1)
        if sep <= 0:
            raise ValueError(f"{path}:{n}: expected ACCESS_KEY=SECRET_KEY")
        out[line[:sep].strip()] = line[sep + 1 :].strip()
    return out


def keys_from_broker_conf(extra: dict | None) -> dict[str, str]:
    """authenticationEnabled=true + initAuthenticationUser={"username":..,"password":..} from broker.conf."""
    extra = extra or {}
    if str(extra.get("authenticationEnabled", "false")).strip().lower() != "true":
        return {}
    raw = extra.get("initAuthenticationUser")
    if not raw:
        raise ValueError('authenticationEnabled=true needs initAuthenticationUser={"username":..,"password":..}')
    try:
        user = json.loads(str(raw))
        return {str(user["username"]): str(user["password"])}
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise ValueError(f"initAuthenticationUser: {e}") from None


def _response_class(method: str):
    desc = spb.DESCRIPTOR.services_by_name["MessagingService"].methods_by_name.get(method)
    if desc is None:
        return None, False, False
    return getattr(spb, desc.output_type.name), desc.client_streaming, desc.server_streaming


class AuthInterceptor(grpc.aio.ServerInterceptor):
    """Refuses MessagingService calls whose signature does not verify, with Code.UNAUTHORIZED (grpc.aio)."""

    def __init__(self, keys: dict[str, str]):
        self.keys = dict(keys)

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        if handler is None or not self.keys:
            return handler
        full = handler_call_details.method or ""
        service, _, method = full.strip("/").rpartition("/")
        if service != SERVICE:
            return handler
        md = {k: v for k, v in (handler_call_details.invocation_metadata or ())}
        try:
            verify(self.keys, md)
            return handler
        except AuthError as e:
            problem = str(e)
        log.info("refused %s from client %s: %s", method, md.get("x-mq-client-id"), problem)
        cls, client_streaming, server_streaming = _response_class(method)
        if cls is None:
            return handler
        if method == "Telemetry":

            def make():
                return spb.TelemetryCommand(status=pb.Status(code=pb.Code.UNAUTHORIZED, message=problem))
        else:

            def make():
                return cls(status=pb.Status(code=pb.Code.UNAUTHORIZED, message=problem))

        kw = dict(request_deserializer=handler.request_deserializer, response_serializer=handler.response_serializer)
        if client_streaming and server_streaming:

            async def stream_stream(request_iterator, context):
                yield make()

            return grpc.stream_stream_rpc_method_handler(stream_stream, **kw)
        if server_streaming:

            async def unary_stream(request, context):
                yield make()

            return grpc.unary_stream_rpc_method_handler(unary_stream, **kw)

        async def unary(request, context):
            return make()

        if client_streaming:
            return grpc.stream_unary_rpc_method_handler(unary, **kw)
        return grpc.unary_unary_rpc_method_handler(unary, **kw)
