"""RocketMQ's plain ACL (ACL 1.0 of RocketMQ 4.x and 5.x up to 5.3: PlainAccessValidator) over the remoting
protocol.

A client signs each request (AclClientRPCHook; the C++ core's ClientRPCHook): it adds its AccessKey (the C++ core
also its OnsChannel, the Java client a SecurityToken when it has one) to the extFields, then Signature =
Base64(HMAC-SHA1(secret key, content)) where the content is the values of every extField but Signature, in the
order of their names (Java String order), followed by the body (AclUtils.combineRequestContent, AclSigner).

The server (PlainPermissionManager.validate) accepts a request when the client's address is in
globalWhiteRemoteAddresses, or its account's whiteRemoteAddress; else the AccessKey must name an account, the
signature must match, and the account must hold the permission each resource of the request needs
(PlainAccessResource.parse: sends need PUB on the topic, SUB on a %RETRY% topic; pulls, heartbeats, offset
updates, consumer lists, unregistering and send-back need SUB on the group (its %RETRY% topic) and topics;
Permission.ADMIN_CODE requests need an admin account, and so do the name server's requests that change its state,
NAMESRV_ADMIN_CODES, from any address but a global white one; every other request only a valid signature). A resource
not listed in topicPerms/groupPerms gets defaultTopicPerm/defaultGroupPerm (DENY when not given).

A refused request is answered as RocketMQ's broker answers an AclException thrown by its RPC hook: SYSTEM_ERROR
with the exception as remark ("org.apache.rocketmq.acl.common.AclException: Check signature failed for
accessKey=..."; RocketMQ adds the first stack frame, which means nothing here). A oneway request gets no answer.

RocketMQ's own name server checks nothing; RocketMQ 5's proxy, which answers route queries for remoting clients,
validates every request the same way (AuthenticationPipeline), and `rocketstore serve` does the same on its name
server. Configured by a plain_acl.yml (PlainAccessData; several files when a directory is given, as
RocketMQ's conf/acl/ is read): globalWhiteRemoteAddresses, accounts of accessKey, secretKey (both longer than 6
characters), whiteRemoteAddress, admin, defaultTopicPerm, defaultGroupPerm, topicPerms and groupPerms
("name=PUB|SUB"); reading and watching the files: acl_files.py."""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from . import fastjson, headers
from .acl_address import AclConfigError, Matcher, matcher
from .codes import RequestCode, ResponseCode
from .command import RemotingCommand, response_to
from .errors import HeaderError, RemotingProtocolError

log = logging.getLogger("rocketstore.remoting.acl")

__all__ = ["AclConfigError", "AclError", "PlainAcl", "remoting_hook", "sign", "signed_content"]

# SessionCredentials' extField names
ACCESS_KEY = "AccessKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"
ONS_CHANNEL = "OnsChannel"  # the C++ core's channel, signed like any other field

RETRY_PREFIX = "%RETRY%"  # MixAll.RETRY_GROUP_TOPIC_PREFIX: a group's resource is its retry topic
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"  # TopicValidator.RMQ_SYS_TRACE_TOPIC: publishing traces needs no permission
UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"  # MixAll.UNIQUE_MSG_QUERY_FLAG, left out of the content of old clients
V4_9_3 = 399  # MQVersion.Version.V4_9_3.ordinal(): up to it that field was not signed
EXCEPTION = "org.apache.rocketmq.acl.common.AclException"

# Permission: bits of what an account owns or a request needs
DENY, ANY, PUB, SUB = 1, 2, 4, 8
_PERM_NAMES = {"PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB, "SUB|PUB": PUB | SUB, "DENY": DENY}

# Permission.ADMIN_CODE: topic and group changes, broker config, and the ACL requests (50..52, RequestCode's
# UPDATE_AND_CREATE_ACL_CONFIG, DELETE_ACL_CONFIG, GET_BROKER_CLUSTER_ACL_INFO)
ADMIN_CODES = frozenset(
    {
        RequestCode.UPDATE_AND_CREATE_TOPIC,
        RequestCode.UPDATE_BROKER_CONFIG,
        RequestCode.DELETE_TOPIC_IN_BROKER,
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
        RequestCode.DELETE_SUBSCRIPTIONGROUP,
        # (not in RocketMQ's plain ACL list, which predates it) it creates groups as request 200 does: a
        # non-admin account must not do through the list what it may not do one group at a time
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST,
        # the same for topics (request 17 through a list) and for deleting files at once
        RequestCode.UPDATE_AND_CREATE_TOPIC_LIST,
        RequestCode.DELETE_EXPIRED_COMMITLOG,
        RequestCode.UPDATE_AND_CREATE_STATIC_TOPIC,
        50,
        51,
        52,
    }
)
# the name server's requests that change its state (routes, broker registrations, KV and server config):
# RocketMQ's name server checks nothing, but with an ACL on, rocketstore's promises these to admin accounts
# only, as a broker's topic changes are (a non-admin could otherwise unregister the broker, wipe its write
# permission or register it at another address); an account's white address spares the signature, not this
NAMESRV_ADMIN_CODES = frozenset(
    {
        RequestCode.PUT_KV_CONFIG,
        RequestCode.DELETE_KV_CONFIG,
        RequestCode.REGISTER_BROKER,
        RequestCode.UNREGISTER_BROKER,
        RequestCode.BROKER_HEARTBEAT,
        RequestCode.QUERY_DATA_VERSION,  # also refreshes the broker's liveness, as a heartbeat does
        RequestCode.WIPE_WRITE_PERM_OF_BROKER,
        RequestCode.ADD_WRITE_PERM_OF_BROKER,
        RequestCode.DELETE_TOPIC_IN_NAMESRV,
        RequestCode.REGISTER_TOPIC_IN_NAMESRV,
        RequestCode.UPDATE_NAMESRV_CONFIG,
    }
)
ADMIN_CODES = ADMIN_CODES | NAMESRV_ADMIN_CODES


class AclError(Exception):
    """A request the ACL refuses; the message is RocketMQ's AclException message."""

    @property
    def remark(self) -> str:
        return f"{EXCEPTION}: {self}"


# ---------------------------------------------------------------------------------------------- signature
def _java_order(name: str) -> bytes:
    """Java's String.compareTo orders by UTF-16 code units (a TreeMap of the fields)."""
    return name.encode("utf-16-be", "surrogatepass")


def signed_content(ext_fields: dict[str, str] | None, body: bytes | None, version: int = 0) -> bytes:
    """The bytes a request's signature covers: every extField value but Signature's, in the order of the field
    names, as UTF-8, then the body (PlainAccessResource.parse + AclUtils.combineRequestContent)."""
    fields = ext_fields or {}
    values = []
    for name in sorted(fields, key=_java_order):
        if name == SIGNATURE or (name == UNIQUE_KEY_QUERY and version <= V4_9_3):
            continue
        values.append(fields[name] or "")
    return "".join(values).encode("utf-8", "replace") + (body or b"")


def sign(content: bytes, secret_key: str) -> str:
    """AclSigner.calSignature: Base64 of HMAC-SHA1 keyed with the secret key's UTF-8 bytes."""
    digest = hmac.new(secret_key.encode("utf-8"), content, hashlib.sha1).digest()
    return base64.b64encode(digest).decode("ascii")


# ---------------------------------------------------------------------------------------------- permissions
def parse_perm(text: str | None) -> int:
    """Permission.parsePermFromString: PUB, SUB, PUB|SUB (either order), anything else DENY."""
    return _PERM_NAMES.get((text or "").strip(), DENY)


def check_permission(needed: int, owned: int) -> bool:
    """Permission.checkPermission: DENY owns nothing; ANY is satisfied by PUB or SUB."""
    if owned & DENY:
        return False
    if needed & ANY:
        return bool(owned & (PUB | SUB))
    return bool(needed & owned)


def retry_topic(group: str | None) -> str | None:
    return None if group is None else RETRY_PREFIX + group


def _describe(resource: str) -> str:
    """PlainAccessResource.printStr: "group:G" for a retry topic (KeyBuilder.parseGroup), else "topic:T"."""
    if not resource.startswith(RETRY_PREFIX):
        return f"topic:{resource}"
    group = resource[len(RETRY_PREFIX) :]
    if "+" in group and len(group.split("+")) == 2:  # a POP retry topic %RETRY%group+topic
        group = group.split("+")[0]
    return f"group:{group}"


def _topic_perm(topic: str | None) -> int:
    """A send to a retry topic is a consumer's (SUB), to any other a producer's (PUB)."""
    return SUB if topic is not None and topic.startswith(RETRY_PREFIX) else PUB


def _heartbeat_needs(cmd: RemotingCommand, ext: dict) -> list:
    data = fastjson.loads(cmd.body) if cmd.body else {}
    if not isinstance(data, dict):
        raise RemotingProtocolError("heartbeat body is not an object")
    out = []
    for consumer in data.get("consumerDataSet") or ():
        out.append((retry_topic(consumer.get("groupName")), SUB))
        out.extend((sub.get("topic"), SUB) for sub in consumer.get("subscriptionDataSet") or ())
    return out


def _offset_update_needs(cmd: RemotingCommand, ext: dict) -> list:
    h = headers.read(cmd, {"consumerGroup": "str", "topic": "str", "queueId": "int", "commitOffset": "long"})
    return [(retry_topic(h["consumerGroup"]), SUB), (h["topic"], SUB)]


# PlainAccessResource.parse, request by request: (resource, permission) pairs, a later pair for the same resource
# winning. RocketMQ's has no case for a lite pull (a signature is enough there): rocketstore asks what a pull
# needs, so that a lite pull is no way around the topic and group permissions.
_NEEDS = {
    RequestCode.SEND_MESSAGE: lambda cmd, ext: [(ext.get("topic"), _topic_perm(ext.get("topic")))],
    RequestCode.SEND_MESSAGE_V2: lambda cmd, ext: [(ext.get("b"), _topic_perm(ext.get("b")))],
    RequestCode.SEND_BATCH_MESSAGE: lambda cmd, ext: [(ext.get("b"), _topic_perm(ext.get("b")))],
    RequestCode.CONSUMER_SEND_MSG_BACK: lambda cmd, ext: [(retry_topic(ext.get("group")), SUB)],
    RequestCode.PULL_MESSAGE: lambda cmd, ext: [(ext.get("topic"), SUB), (retry_topic(ext.get("consumerGroup")), SUB)],
    RequestCode.LITE_PULL_MESSAGE: lambda cmd, ext: [
        (ext.get("topic"), SUB),
        (retry_topic(ext.get("consumerGroup")), SUB),
    ],
    RequestCode.QUERY_MESSAGE: lambda cmd, ext: [(ext.get("topic"), SUB)],
    RequestCode.HEART_BEAT: _heartbeat_needs,
    RequestCode.UNREGISTER_CLIENT: lambda cmd, ext: [
        (retry_topic(headers.read(cmd, {"clientID": "str"}, {"consumerGroup": "str"})["consumerGroup"]), SUB)
    ],
    RequestCode.GET_CONSUMER_LIST_BY_GROUP: lambda cmd, ext: [
        (retry_topic(headers.read(cmd, {"consumerGroup": "str"})["consumerGroup"]), SUB)
    ],
    RequestCode.UPDATE_CONSUMER_OFFSET: _offset_update_needs,
}


def needed_permissions(cmd: RemotingCommand) -> dict[str, int]:
    """What a request needs on which resource (topic, or a group as its retry topic): PlainAccessResource.parse.
    A header or body it cannot read is refused with that problem as the message."""
    rule = _NEEDS.get(cmd.code)
    if rule is None:
        return {}
    try:
        pairs = rule(cmd, cmd.ext_fields or {})
    except (HeaderError, RemotingProtocolError, AttributeError, TypeError) as e:
        raise AclError(str(e)) from None
    return {resource: perm for resource, perm in pairs if resource is not None}


# ---------------------------------------------------------------------------------------------- accounts
@dataclass
class Account:
    access_key: str
    secret_key: str
    white_address: Matcher
    admin: bool = False
    default_topic_perm: int = DENY
    default_group_perm: int = DENY
    perms: dict[str, int] = field(default_factory=dict)  # topic, or %RETRY%group, -> permission

    def check(self, cmd: RemotingCommand, need: dict[str, int]) -> None:
        """PlainPermissionChecker.check: admins may do anything; others need what each resource asks."""
        if self.admin:
            return
        if cmd.code in ADMIN_CODES:
            raise AclError(f"Need admin permission for request code={cmd.code}, but accessKey={self.access_key} is not")
        for resource, perm in need.items():
            is_group = resource.startswith(RETRY_PREFIX)
            owned = self.perms.get(resource)
            if owned is None:
                default = self.default_group_perm if is_group else self.default_topic_perm
                if not check_permission(perm, default):
                    raise AclError(f"No default permission for {_describe(resource)}")
            elif not check_permission(perm, owned):
                raise AclError(f"No permission for {_describe(resource)}")


def _text(value) -> str | None:
    return None if value is None else str(value)


def _bool(value) -> bool:
    return str(value).strip().lower() in ("true", "yes", "on", "y")


def _resource_perms(items, is_topic: bool, source: str) -> dict[str, int]:
    """Permission.parseResourcePerms: "name=PERM" entries; a group becomes its retry topic."""
    out = {}
    if items in (None, ""):
        return out
    if not isinstance(items, list):
        raise AclConfigError(f"{source}: {'topicPerms' if is_topic else 'groupPerms'} must be a list")
    for item in items:
        parts = [p for p in str(item).split("=") if p]
        if len(parts) != 2:
            kind = "topic" if is_topic else "group"
            raise AclConfigError(f"{source}: Parse resource permission failed for {kind}:{item}")
        name, perm = parts[0].strip(), parts[1].strip()
        if perm != "DENY" and parse_perm(perm) == DENY:
            log.warning("%s: %r is not PUB, SUB, PUB|SUB or DENY: taken as DENY", source, item)
        out[name if is_topic else RETRY_PREFIX + name] = parse_perm(perm)
    return out


def build_account(entry: dict, source: str) -> Account:
    """PlainPermissionManager.buildPlainAccessResource: keys longer than 6 characters, then the permissions."""
    if not isinstance(entry, dict):
        raise AclConfigError(f"{source}: each account must be a mapping, not {entry!r}")
    ak, sk = _text(entry.get("accessKey")), _text(entry.get("secretKey"))
    if ak is None or sk is None or len(ak) <= 6 or len(sk) <= 6:
        raise AclConfigError(
            f"{source}: The accessKey={ak} and its secretKey cannot be null and length should longer than 6"
        )
    groups = _resource_perms(entry.get("groupPerms"), False, source)
    topics = _resource_perms(entry.get("topicPerms"), True, source)
    return Account(
        access_key=ak,
        secret_key=sk,
        white_address=matcher(_text(entry.get("whiteRemoteAddress"))),
        admin=_bool(entry.get("admin", False)),
        default_topic_perm=parse_perm(_text(entry.get("defaultTopicPerm"))),
        default_group_perm=parse_perm(_text(entry.get("defaultGroupPerm"))),
        perms={**groups, **topics},
    )


class PlainAcl:
    """The accounts and white addresses of one or more plain_acl.yml files."""

    def __init__(self, accounts: list[Account] | None = None, global_white: list[Matcher] | None = None):
        self.accounts: dict[str, Account] = {}
        for a in accounts or ():
            self.accounts.setdefault(a.access_key, a)
        self.global_white = list(global_white or ())
        self.paths: tuple[str, ...] = ()  # the files or directories it was loaded from

    def replace(self, other: "PlainAcl") -> None:
        """Take another ACL's accounts and white addresses (a reload), in place for the hooks holding this one."""
        self.accounts, self.global_white = other.accounts, other.global_white

    def add_data(self, data, source: str = "plain_acl.yml") -> None:
        """One file's PlainAccessData: globalWhiteRemoteAddresses and accounts. An access key already defined
        (in an earlier file) keeps its first definition, as RocketMQ does."""
        if data in (None, ""):
            return
        if not isinstance(data, dict):
            raise AclConfigError(f"{source}: not a mapping of globalWhiteRemoteAddresses and accounts")
        white = data.get("globalWhiteRemoteAddresses") or []
        accounts = data.get("accounts") or []
        if not isinstance(white, list) or not isinstance(accounts, list):
            raise AclConfigError(f"{source}: globalWhiteRemoteAddresses and accounts must be lists")
        try:
            self.global_white.extend(matcher(_text(p)) for p in white)
            for entry in accounts:
                account = build_account(entry, source)
                if account.access_key in self.accounts:
                    log.warning("%s: accessKey %s is defined in another ACL file already", source, account.access_key)
                    continue
                self.accounts[account.access_key] = account
        except AclConfigError as e:
            if str(e).startswith(source):
                raise
            raise AclConfigError(f"{source}: {e}") from None

    def validate(self, cmd: RemotingCommand, host: str) -> None:
        """PlainPermissionManager.validate for a request from `host` (the client's IP): raise AclError unless
        the request is allowed."""
        need = needed_permissions(cmd)
        if any(white(host) for white in self.global_white):
            return
        ext = cmd.ext_fields or {}
        access_key = ext.get(ACCESS_KEY)
        if access_key is None:
            raise AclError("No accessKey is configured")
        account = self.accounts.get(access_key)
        if account is None:
            raise AclError(f"No acl config for {access_key}")
        if account.white_address(host):
            if cmd.code in NAMESRV_ADMIN_CODES:
                account.check(cmd, need)
            return
        expected = sign(signed_content(ext, cmd.body, cmd.version), account.secret_key)
        given = (ext.get(SIGNATURE) or "").encode("utf-8", "replace")
        if not hmac.compare_digest(expected.encode("ascii"), given):
            raise AclError(f"Check signature failed for accessKey={access_key}")
        if need.get(TRACE_TOPIC) == PUB:  # message traces are written by every client
            return
        account.check(cmd, need)


# ---------------------------------------------------------------------------------------------- server hook
def remoting_hook(acl: PlainAcl) -> Callable[[RemotingCommand, object], RemotingCommand | None]:
    """RemotingServer's before_request: None lets a request through; a refused one gets SYSTEM_ERROR with the
    AclException as remark. Never raises: a bug here refuses the request rather than letting it through."""

    def check(cmd: RemotingCommand, conn) -> RemotingCommand | None:
        host = conn.remote.rpartition(":")[0] if ":" in conn.remote else conn.remote
        try:
            acl.validate(cmd, host)
            return None
        except AclError as e:
            remark = e.remark
        except Exception as e:  # not RocketMQ's answer for anything: a bug in the checks above
            log.exception("ACL check of request %d from %s failed", cmd.code, conn.remote)
            remark = f"{EXCEPTION}: {type(e).__name__}: {e}"
        log.info("refused request %d from %s: %s", cmd.code, conn.remote, remark)
        return response_to(cmd, ResponseCode.SYSTEM_ERROR, remark)

    return check
