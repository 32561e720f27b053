"""`rocketstore serve --acl FILE` and broker.conf's aclEnable=true: the name server and the broker refuse requests
that do not sign with a configured account (SYSTEM_ERROR, AclException remark) and answer signed ones; a bad or
missing ACL file stops serve with an error naming it. The ACL files here are JSON (JSON is YAML too)."""

import asyncio
import base64
import hashlib
import hmac
import json
import signal
import subprocess
import sys

from remoting_client import Client
from test_serve_remoting_cli import free_port, serve

from rocketstore.remoting.codes import RequestCode as RC

ACL = {"accounts": [{"accessKey": "reader01", "secretKey": "secret-r1", "topicPerms": ["T=SUB"]}]}


def signed_ext(ext: dict, secret: str) -> dict:
    """AclClientRPCHook by hand: the values in the order of their (ASCII) names, no body, HMAC-SHA1, Base64."""
    ext = dict(ext, AccessKey="reader01")
    content = "".join(ext[k] for k in sorted(ext)).encode()
    return dict(ext, Signature=base64.b64encode(hmac.new(secret.encode(), content, hashlib.sha1).digest()).decode())


def ask(ns_port, broker_port):
    async def main():
        ns = await Client.connect(ns_port)
        b = await Client.connect(broker_port)
        try:
            route = {"topic": "TBW102"}
            offset = {"topic": "T", "queueId": "0"}
            return (
                await ns.call(RC.GET_ROUTEINFO_BY_TOPIC, route, version=401),
                await ns.call(RC.GET_ROUTEINFO_BY_TOPIC, signed_ext(route, "secret-r1"), version=401),
                await b.call(RC.GET_MAX_OFFSET, offset),
                await b.call(RC.GET_MAX_OFFSET, signed_ext(offset, "wrong-secret")),
                await b.call(RC.GET_MAX_OFFSET, signed_ext(offset, "secret-r1")),
            )
        finally:
            await ns.close()
            await b.close()

    return asyncio.run(main())


def check_served_with_acl(proc, lines, ns_port, broker_port):
    try:
        unsigned_route, route, unsigned_offset, wrong_offset, offset = ask(ns_port, broker_port)
        assert (unsigned_route.code, unsigned_route.remark) == (
            1, "org.apache.rocketmq.acl.common.AclException: No accessKey is configured"
        )  # fmt: skip
        assert route.code == 0 and b"brokerDatas" in route.body
        assert (unsigned_offset.code, unsigned_offset.remark) == (1, unsigned_route.remark)
        assert (wrong_offset.code, wrong_offset.remark) == (
            1, "org.apache.rocketmq.acl.common.AclException: Check signature failed for accessKey=reader01"
        )  # fmt: skip
        assert offset.code == 0 and offset.ext_fields == {"offset": "0"}
        assert "ACL: 1 account(s)" in "".join(lines)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0


def test_serve_with_acl_file(tmp_path):
    path = tmp_path / "plain_acl.yml"
    path.write_text(json.dumps(ACL))
    ns_port, broker_port = free_port(), free_port()
    proc, lines = serve(tmp_path, "--no-grpc", "--namesrv", f"127.0.0.1:{ns_port}", "--remoting",
                        f"127.0.0.1:{broker_port}", "--acl", str(path))  # fmt: skip
    check_served_with_acl(proc, lines, ns_port, broker_port)


def test_acl_enable_reads_plain_acl_beside_broker_conf(tmp_path):
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "broker.conf").write_text("brokerName=rocketstore\naclEnable=true\n")
    (conf / "plain_acl.yml").write_text(json.dumps(ACL))
    ns_port, broker_port = free_port(), free_port()
    proc, lines = serve(tmp_path, "--no-grpc", "--namesrv", f"127.0.0.1:{ns_port}", "--remoting",
                        f"127.0.0.1:{broker_port}", "-c", str(conf / "broker.conf"))  # fmt: skip
    check_served_with_acl(proc, lines, ns_port, broker_port)


def run_serve(tmp_path, *args):
    return subprocess.run(
        [sys.executable, "-m", "rocketstore.cli", "serve", str(tmp_path / "s"), "--no-grpc", *args],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_bad_acl_files_stop_serve_with_their_problem(tmp_path):
    bad = tmp_path / "bad.yml"
    bad.write_text(json.dumps({"accounts": [{"accessKey": "short", "secretKey": "secret-long"}]}))
    r = run_serve(tmp_path, "--acl", str(bad), "--namesrv", f"127.0.0.1:{free_port()}",
                  "--remoting", f"127.0.0.1:{free_port()}")  # fmt: skip
    assert r.returncode == 1 and f"{bad}: The accessKey=short" in r.stderr, r.stderr
    conf = tmp_path / "broker.conf"
    conf.write_text("aclEnable=true\n")
    r = run_serve(tmp_path, "-c", str(conf), "--namesrv", f"127.0.0.1:{free_port()}",
                  "--remoting", f"127.0.0.1:{free_port()}")  # fmt: skip
    assert r.returncode == 1 and "aclEnable=true" in r.stderr and "no plain_acl.yml" in r.stderr, r.stderr
