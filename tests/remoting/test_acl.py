"""RocketMQ's plain ACL (remoting/acl.py): the signed content and signature computed by hand (hmac, hashlib,
base64) in the order AclUtils.combineRequestContent uses, the permission each request code needs
(PlainAccessResource.parse, PlainPermissionChecker), the validation order (PlainPermissionManager.validate), the
address patterns (RemoteAddressStrategyFactory, cases from RocketMQ's RemoteAddressStrategyTest), plain_acl.yml
loading, and the refusal a RemotingServer sends (SYSTEM_ERROR with the AclException as remark)."""

import asyncio
import base64
import hashlib
import hmac
import json

import pytest
from remoting_client import Client

from rocketstore.remoting.acl import (
    AclConfigError,
    AclError,
    PlainAcl,
    check_permission,
    needed_permissions,
    remoting_hook,
    sign,
    signed_content,
)
from rocketstore.remoting.acl_files import load_plain_acl, parse_plain_acl, watch_files
from rocketstore.remoting.acl_address import matcher
from rocketstore.remoting.codes import RequestCode as RC
from rocketstore.remoting.codes import ResponseCode
from rocketstore.remoting.command import RemotingCommand, response_to
from rocketstore.remoting.server import RemotingServer


def hand_signature(content: bytes, secret: str) -> str:
    return base64.b64encode(hmac.new(secret.encode(), content, hashlib.sha1).digest()).decode()


# ------------------------------------------------------------------------------------------------ signature
def test_pull_header_content_in_java_field_order():
    # AclClientRPCHookTest's PullMessageRequestHeader; TreeMap order puts the capitalised AccessKey first
    ext = {"consumerGroup": "group", "topic": "topic", "queueId": "1", "queueOffset": "2", "maxMsgNums": "32",
           "sysFlag": "0", "commitOffset": "0", "suspendTimeoutMillis": "15000", "subVersion": "0",
           "AccessKey": "ak"}  # fmt: skip
    # AccessKey commitOffset consumerGroup maxMsgNums queueId queueOffset subVersion suspendTimeoutMillis sysFlag topic
    content = b"ak" + b"0" + b"group" + b"32" + b"1" + b"2" + b"0" + b"15000" + b"0" + b"topic"
    assert signed_content(ext, b"") == content == b"ak0group32120150000topic"
    assert sign(content, "secretKey1") == hand_signature(content, "secretKey1")


def test_cpp_send_content_has_channel_and_body_and_skips_signature():
    # the C++ core signs AccessKey and OnsChannel with the SendMessageRequestHeaderV2 fields, then the body
    ext = {"a": "pg", "b": "T", "c": "TBW102", "d": "4", "e": "2", "f": "0", "g": "1700000000000", "h": "0",
           "i": "TAGS\x01A\x02", "j": "0", "k": "false", "m": "false", "AccessKey": "producer1",
           "OnsChannel": "ALIYUN", "Signature": "ignored"}  # fmt: skip
    body = b"hello \xe4\xb8\x96"
    content = b"producer1ALIYUN" + b"pg" + b"T" + b"TBW102" + b"4" + b"2" + b"0" + b"1700000000000" + b"0"
    content += b"TAGS\x01A\x02" + b"0" + b"false" + b"false" + body
    assert signed_content(ext, body) == content
    assert sign(signed_content(ext, body), "secret-p1") == hand_signature(content, "secret-p1")


def test_non_ascii_values_are_utf8_and_names_sort_as_java_strings():
    # Java compares UTF-16 code units: U+1F600 (surrogates D83D DE00) sorts before U+FF21; code points say the reverse
    ext = {"\uff21": "x", "\U0001f600": "y", "Z": "\u00e9"}
    assert signed_content(ext, None) == "\u00e9".encode() + b"y" + b"x"


def test_unique_key_query_is_unsigned_up_to_4_9_3():
    # PlainAccessResource.parse skips _UNIQUE_KEY_QUERY when version <= V4_9_3 (ordinal 399)
    ext = {"topic": "T", "key": "k", "_UNIQUE_KEY_QUERY": "true"}
    assert signed_content(ext, b"", version=399) == b"kT"
    assert signed_content(ext, b"", version=400) == b"truekT"


# ------------------------------------------------------------------------------------------------ permissions
@pytest.mark.parametrize(
    "needed, owned, ok",
    [(4, 4, True), (8, 4, False), (4, 12, True), (8, 12, True), (4, 1, False), (4, 5, False),
     (2, 4, True), (2, 8, True), (2, 1, False), (2, 9, False)],
)  # fmt: skip
def test_check_permission(needed, owned, ok):
    # Permission: DENY=1 ANY=2 PUB=4 SUB=8; DENY owns nothing, ANY needs PUB or SUB
    assert check_permission(needed, owned) is ok


def cmd(code, ext=None, body=b"", version=0):
    return RemotingCommand(code=code, ext_fields=ext, body=body, version=version)


HEARTBEAT = json.dumps(
    {"clientID": "c1", "producerDataSet": [{"groupName": "pg"}],
     "consumerDataSet": [{"groupName": "cg", "subscriptionDataSet": [{"topic": "T1"}, {"topic": "%RETRY%cg"}]}]}
).encode()  # fmt: skip


@pytest.mark.parametrize(
    "request_, needed",
    [
        (cmd(RC.SEND_MESSAGE, {"topic": "T"}), {"T": 4}),
        (cmd(RC.SEND_MESSAGE, {"topic": "%RETRY%g"}), {"%RETRY%g": 8}),
        (cmd(RC.SEND_MESSAGE_V2, {"b": "T"}), {"T": 4}),
        (cmd(RC.SEND_BATCH_MESSAGE, {"b": "T"}), {"T": 4}),
        (cmd(RC.CONSUMER_SEND_MSG_BACK, {"group": "g"}), {"%RETRY%g": 8}),
        (cmd(RC.PULL_MESSAGE, {"topic": "T", "consumerGroup": "g"}), {"T": 8, "%RETRY%g": 8}),
        (cmd(RC.LITE_PULL_MESSAGE, {"topic": "T", "consumerGroup": "g"}), {"T": 8, "%RETRY%g": 8}),
        (cmd(RC.QUERY_MESSAGE, {"topic": "T"}), {"T": 8}),
        (cmd(RC.HEART_BEAT, {}, HEARTBEAT), {"%RETRY%cg": 8, "T1": 8}),
        (cmd(RC.UNREGISTER_CLIENT, {"clientID": "c", "consumerGroup": "g"}), {"%RETRY%g": 8}),
        (cmd(RC.UNREGISTER_CLIENT, {"clientID": "c", "producerGroup": "p"}), {}),
        (cmd(RC.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "g"}), {"%RETRY%g": 8}),
        (
            cmd(RC.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "g", "topic": "T", "queueId": "0", "commitOffset": "5"}),
            {"%RETRY%g": 8, "T": 8},
        ),
        (cmd(RC.QUERY_CONSUMER_OFFSET, {"consumerGroup": "g", "topic": "T", "queueId": "0"}), {}),
        (cmd(RC.GET_MAX_OFFSET, {"topic": "T", "queueId": "0"}), {}),
        (cmd(RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"}), {}),
        (cmd(RC.UPDATE_AND_CREATE_TOPIC, {"topic": "T"}), {}),
        (cmd(RC.SEND_MESSAGE_V2, None), {}),
    ],
)
def test_needed_permissions_per_request_code(request_, needed):
    assert needed_permissions(request_) == needed


def test_unreadable_header_is_refused_with_its_problem():
    # decodeCommandCustomHeader's RemotingCommandException becomes the AclException's message
    with pytest.raises(AclError, match=r"^the custom field <queueId> is null$"):
        needed_permissions(cmd(RC.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "g", "topic": "T", "commitOffset": "5"}))
    with pytest.raises(AclError):
        needed_permissions(cmd(RC.HEART_BEAT, {}, b"[1, 2]"))


# ------------------------------------------------------------------------------------------------ validation
ACL_DATA = {
    "globalWhiteRemoteAddresses": ["10.10.103.*", "192.168.0.*"],
    "accounts": [
        {"accessKey": "producer1", "secretKey": "secret-p1", "defaultTopicPerm": "DENY", "defaultGroupPerm": "DENY",
         "topicPerms": ["T=PUB", "Both=PUB|SUB", "Off=DENY"], "groupPerms": ["g=SUB"]},
        {"accessKey": "consumer1", "secretKey": "secret-c1", "defaultTopicPerm": "SUB", "defaultGroupPerm": "DENY",
         "topicPerms": ["T=SUB", "Off=DENY"], "groupPerms": ["g=SUB", "h=PUB"]},
        {"accessKey": "trusted1", "secretKey": "secret-t1", "whiteRemoteAddress": "127.0.0.{5,6}"},
        {"accessKey": "rocketmq2", "secretKey": "12345678", "admin": "true"},
    ],
}  # fmt: skip
SECRETS = {"producer1": "secret-p1", "consumer1": "secret-c1", "trusted1": "secret-t1", "rocketmq2": "12345678"}


def make_acl() -> PlainAcl:
    acl = PlainAcl()
    acl.add_data(ACL_DATA)
    return acl


def signed(code, ext, body=b"", ak="producer1", secret=None):
    """A request signed as AclClientRPCHook does it, the content written out by hand: values by sorted name."""
    ext = dict(ext, AccessKey=ak)
    content = "".join(ext[k] for k in sorted(ext)).encode() + body  # ASCII names: Java order is this order
    ext["Signature"] = hand_signature(content, secret or SECRETS[ak])
    return cmd(code, ext, body)


def refusal(acl, request, host="127.0.0.1"):
    try:
        acl.validate(request, host)
        return None
    except AclError as e:
        return str(e)


SEND_T = {"a": "pg", "b": "T", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "1", "h": "0", "j": "0"}
PULL = {"consumerGroup": "g", "topic": "T", "queueId": "0", "queueOffset": "0", "maxMsgNums": "32", "sysFlag": "2"}


@pytest.mark.parametrize(
    "request_, problem",
    [
        (signed(RC.SEND_MESSAGE_V2, SEND_T, b"body"), None),
        (signed(RC.SEND_MESSAGE_V2, SEND_T, b"body", secret="wrong-secret"),
         "Check signature failed for accessKey=producer1"),
        (signed(RC.SEND_MESSAGE_V2, dict(SEND_T, b="Both")), None),
        (signed(RC.SEND_MESSAGE_V2, dict(SEND_T, b="Off")), "No permission for topic:Off"),
        (signed(RC.SEND_MESSAGE_V2, dict(SEND_T, b="Other")), "No default permission for topic:Other"),
        (signed(RC.SEND_MESSAGE_V2, dict(SEND_T, b="RMQ_SYS_TRACE_TOPIC")), None),  # traces need no permission
        (signed(RC.SEND_MESSAGE_V2, SEND_T, ak="consumer1"), "No permission for topic:T"),
        (signed(RC.PULL_MESSAGE, PULL, ak="consumer1"), None),
        (signed(RC.PULL_MESSAGE, dict(PULL, topic="Any"), ak="consumer1"), None),  # defaultTopicPerm SUB
        (signed(RC.PULL_MESSAGE, dict(PULL, topic="Off"), ak="consumer1"), "No permission for topic:Off"),
        (signed(RC.PULL_MESSAGE, dict(PULL, consumerGroup="h"), ak="consumer1"), "No permission for group:h"),
        (signed(RC.PULL_MESSAGE, dict(PULL, consumerGroup="x"), ak="consumer1"), "No default permission for group:x"),
        (signed(RC.PULL_MESSAGE, PULL, ak="producer1"), "No permission for topic:T"),
        (signed(RC.LITE_PULL_MESSAGE, PULL, ak="producer1"), "No permission for topic:T"),  # rocketstore's rule
        (signed(RC.LITE_PULL_MESSAGE, PULL, ak="consumer1"), None),
        (signed(RC.HEART_BEAT, {}, HEARTBEAT, ak="consumer1"), "No default permission for group:cg"),
        (signed(RC.GET_MAX_OFFSET, {"topic": "Off", "queueId": "0"}, ak="consumer1"), None),  # signature only
        (signed(RC.UPDATE_AND_CREATE_TOPIC, {"topic": "N"}, ak="consumer1"),
         "Need admin permission for request code=17, but accessKey=consumer1 is not"),
        (signed(RC.UPDATE_AND_CREATE_TOPIC, {"topic": "N"}, ak="rocketmq2"), None),
        (signed(RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST, {}, ak="consumer1"),
         "Need admin permission for request code=225, but accessKey=consumer1 is not"),  # as 200, one at a time
        (signed(RC.PULL_MESSAGE, dict(PULL, topic="Off"), ak="rocketmq2"), None),  # admins may do anything
        (signed(RC.SEND_MESSAGE_V2, SEND_T, ak="trusted1", secret="not-its-secret"),
         "Check signature failed for accessKey=trusted1"),  # 127.0.0.1 is not among its addresses
        (cmd(RC.SEND_MESSAGE_V2, SEND_T), "No accessKey is configured"),
        (cmd(RC.SEND_MESSAGE_V2, None), "No accessKey is configured"),
        (cmd(RC.SEND_MESSAGE_V2, dict(SEND_T, AccessKey="nobody99", Signature="x")), "No acl config for nobody99"),
    ],
)  # fmt: skip
def test_validate(request_, problem):
    assert refusal(make_acl(), request_) == problem


def test_signature_covers_the_body():
    r = signed(RC.SEND_MESSAGE_V2, SEND_T, b"body")
    r.body = b"bodY"
    assert refusal(make_acl(), r) == "Check signature failed for accessKey=producer1"


def test_white_addresses_skip_the_signature():
    acl = make_acl()
    unsigned = cmd(RC.SEND_MESSAGE_V2, SEND_T)
    assert refusal(acl, unsigned, "192.168.0.77") is None  # globalWhiteRemoteAddresses: no key needed at all
    assert refusal(acl, unsigned, "192.168.1.77") == "No accessKey is configured"
    forged = cmd(RC.SEND_MESSAGE_V2, dict(SEND_T, AccessKey="trusted1", Signature="forged"))
    assert refusal(acl, forged, "127.0.0.5") is None  # the account's whiteRemoteAddress: no signature check
    assert refusal(acl, forged, "127.0.0.7") == "Check signature failed for accessKey=trusted1"


# ------------------------------------------------------------------------------------------------ addresses
@pytest.mark.parametrize(
    "pattern, host, ok",
    [
        ("*", "1.2.3.4", True), ("*.*.*.*", "::1", True), ("", "127.0.0.1", False),
        ("127.0.0.1", "127.0.0.1", True), ("127.0.0.1", "127.0.0.2", False),
        ("::1", "0000:0000:0000:0000:0000:0000:0000:0001", True), ("::1", "::2", False),
        ("127.0.0.1,127.0.0.2,127.0.0.3", "127.0.0.3", True), ("127.0.0.1,127.0.0.2,127.0.0.3", "127.0.0.4", False),
        ("127.0.0.{1,2,3}", "127.0.0.2", True), ("127.0.0.{1,2,3}", "127.0.0.0", False),
        ("1050::0005:0600:300c:{1,2,3}", "1050:0000:0000:0000:0005:0600:300c:3", True),
        ("1050::0005:0600:300c:{1,2,3}", "1050:0000:0000:0000:0005:0600:300c:4", False),
        ("127.0.0.1-200", "127.0.0.1", True), ("127.0.0.1-200", "127.0.0.200", True),
        ("127.0.0.1-200", "127.0.0.0", False), ("127.0.0.1-200", "127.0.0.201", False),
        ("127.0.0.*", "127.0.0.255", True), ("127.0.0.*", "127.0.1.1", False),
        ("127.0.1-200.*", "127.0.200.9", True), ("127.0.1-200.*", "127.0.201.9", False),
        ("192.100-150.*.*", "192.130.0.2", True), ("192.100-150.*.*", "192.151.0.2", False),
        ("1050::0005:0600:300c:1-200", "1050::0005:0600:300c:200", True),  # hex: 0x1..0x200
        ("1050::0005:0600:300c:1-200", "1050::0005:0600:300c:201", False),
        ("1050::0005:0600:300c:*", "1050::0005:0600:300c:ffff", True),
        ("1050::0005:0600:3001:*", "1050::0005:0600:300c:1", False),
        ("1050::0005:0600:300c:1-200:*", "1050::0005:0600:300c:1:abcd", True),
        ("1050::0005:0600:300c:1-200:*", "1050::0005:0600:300c:201:1", False),
    ],
)  # fmt: skip
def test_address_patterns(pattern, host, ok):
    # RocketMQ's RemoteAddressStrategyTest
    assert matcher(pattern)(host) is ok


@pytest.mark.parametrize("pattern", ["256.0.0.1", "::1ggg", "127.0.0.1,2,3}", "127.0.0.2-1", "127.0.0.-1-200",
                                     "127.0.0.0-256"])  # fmt: skip
def test_bad_address_patterns(pattern):
    with pytest.raises(AclConfigError):
        matcher(pattern)


# ------------------------------------------------------------------------------------------------ files
DISTRIBUTION_YML = """\
globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.*

accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      # the group should convert to retry topic
      - groupA=DENY
      - groupB=PUB|SUB
      - groupC=SUB

  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
    # if it is admin, it could access all resources
    admin: true
"""


def test_distribution_plain_acl_yml():
    # RocketMQ's distribution/conf/plain_acl.yml; secretKey 12345678 is the text "12345678" (a String field)
    acl = parse_plain_acl(DISTRIBUTION_YML)
    a = acl.accounts["RocketMQ"]
    assert (a.secret_key, a.admin, a.default_topic_perm, a.default_group_perm) == ("12345678", False, 1, 8)
    assert a.perms == {"topicA": 1, "topicB": 12, "topicC": 8, "%RETRY%groupA": 1, "%RETRY%groupB": 12,
                       "%RETRY%groupC": 8}  # fmt: skip
    assert a.white_address("127.0.0.1") is False
    b = acl.accounts["rocketmq2"]
    assert b.admin is True and b.white_address("192.168.1.9") and not b.white_address("192.168.2.9")
    assert [w("10.10.103.5") for w in acl.global_white] == [True, False]


@pytest.mark.parametrize(
    "text, problem",
    [
        ("accounts:\n  - accessKey: short\n    secretKey: 12345678\n", "accessKey=short"),
        ("accounts:\n  - accessKey: longenough\n    secretKey: 123456\n", "accessKey=longenough"),
        ("accounts:\n  - accessKey: longenough\n    secretKey: 1234567\n    topicPerms: [noequals]\n",
         "Parse resource permission failed for topic:noequals"),
        ("accounts:\n  - accessKey: longenough\n    secretKey: 1234567\n    whiteRemoteAddress: 256.1.1.1\n",
         "256.1.1.1"),
        ("accounts: [1, 2\n", "not valid YAML"),
        ("- just\n- a list\n", "not a mapping"),
    ],
)  # fmt: skip
def test_bad_files_name_the_problem(text, problem):
    with pytest.raises(AclConfigError, match="acl.yml") as e:
        parse_plain_acl(text, "conf/plain_acl.yml")
    assert problem in str(e.value)


def test_directory_of_files_first_definition_wins(tmp_path):
    d = tmp_path / "acl"
    (d / "sub").mkdir(parents=True)
    (d / "a.yml").write_text("accounts:\n  - accessKey: account1\n    secretKey: first-secret\n")
    (d / "sub" / "b.yaml").write_text(
        "globalWhiteRemoteAddresses: [10.0.0.1]\naccounts:\n  - accessKey: account1\n    secretKey: second-secret\n"
        "  - accessKey: account2\n    secretKey: other-secret\n"
    )
    (d / "notes.txt").write_text("not read")
    acl = load_plain_acl(str(d))
    assert {k: a.secret_key for k, a in acl.accounts.items()} == {
        "account1": "first-secret",
        "account2": "other-secret",
    }
    assert acl.global_white[0]("10.0.0.1")
    with pytest.raises(AclConfigError, match="cannot read"):
        load_plain_acl(str(tmp_path / "missing.yml"))


def test_changed_files_are_reloaded_and_a_broken_change_keeps_the_acl(tmp_path, caplog):
    path = tmp_path / "plain_acl.yml"
    path.write_text("accounts:\n  - accessKey: account1\n    secretKey: first-secret\n")
    acl = load_plain_acl(str(path))

    async def poll(probe, timeout=20):
        for _ in range(int(timeout / 0.02)):
            if probe():
                return True
            await asyncio.sleep(0.02)
        return probe()

    async def main():
        task = asyncio.create_task(watch_files(acl, interval=0.05))
        try:
            await asyncio.sleep(0)  # the watcher takes its first look before it first waits
            path.write_text("accounts:\n  - accessKey: account2\n    secretKey: second-secret\n")
            assert await poll(lambda: list(acl.accounts) == ["account2"])
            path.write_text("accounts:\n  - accessKey: short\n    secretKey: second-secret\n")
            assert await poll(lambda: "ACL not reloaded" in caplog.text)
            assert list(acl.accounts) == ["account2"]
        finally:
            task.cancel()

    with caplog.at_level("INFO", logger="rocketstore.remoting.acl"):
        asyncio.run(main())
    assert "accessKey=short" in caplog.text


# ------------------------------------------------------------------------------------------------ on a server
def test_server_answers_refusals_as_rocketmq_and_runs_accepted_requests():
    handled = []

    async def handler(req, conn):
        handled.append(req.code)
        return response_to(req, ResponseCode.SUCCESS)

    async def main():
        server = RemotingServer({RC.SEND_MESSAGE_V2: handler}, before_request=remoting_hook(make_acl()))
        port = await server.start("127.0.0.1", 0)
        c = await Client.connect(port)
        try:
            ok = signed(RC.SEND_MESSAGE_V2, SEND_T, b"x")
            good = await c.call(ok.code, ok.ext_fields, ok.body)
            bad_sig = signed(RC.SEND_MESSAGE_V2, SEND_T, b"x", secret="wrong-secret")
            wrong = await c.call(bad_sig.code, bad_sig.ext_fields, bad_sig.body)
            unsigned = await c.call(RC.SEND_MESSAGE_V2, SEND_T, b"x")
            unknown = await c.call(4242, {})  # RocketMQ's broker checks before its default processor answers
            await c.send(RemotingCommand(code=RC.SEND_MESSAGE_V2, ext_fields=SEND_T, opaque=7, flag=2))  # oneway
            after = await c.call(ok.code, ok.ext_fields, ok.body)  # the refused oneway got no answer
            return good, wrong, unsigned, unknown, after
        finally:
            await c.close()
            await server.close()

    good, wrong, unsigned, unknown, after = asyncio.run(main())
    assert good.code == after.code == ResponseCode.SUCCESS and handled == [RC.SEND_MESSAGE_V2] * 2
    assert (wrong.code, wrong.remark) == (
        ResponseCode.SYSTEM_ERROR,
        "org.apache.rocketmq.acl.common.AclException: Check signature failed for accessKey=producer1",
    )
    assert (unsigned.code, unsigned.remark) == (
        1, "org.apache.rocketmq.acl.common.AclException: No accessKey is configured"
    )  # fmt: skip
    assert (unknown.code, unknown.remark) == (1, unsigned.remark)
