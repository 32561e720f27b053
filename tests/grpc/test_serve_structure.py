"""How serve is built (issue #14): its errors are RocketStoreErrors, no module reaches into another object's
private names, and its background loops are ServiceThreads."""

import ast
import os

import pytest

from rocketstore.errors import RocketStoreError
from rocketstore.grpc import auth, convert
from rocketstore.broker.pop import Handle, HandleError
from rocketstore.grpc.protocol import definition_pb2 as pb

GRPC_SRC = os.path.join(os.path.dirname(__file__), "..", "..", "src", "rocketstore", "grpc")
BROKER_SRC = os.path.join(os.path.dirname(__file__), "..", "..", "src", "rocketstore", "broker")
PACKAGES = {"grpc": GRPC_SRC, "broker": BROKER_SRC}  # the gRPC side and the broker core under it


# ---------------------------------------------------------------- errors
def test_a_garbage_receipt_handle_is_a_rocketstore_error_and_still_a_value_error():
    with pytest.raises(RocketStoreError) as e:
        Handle.decode("not a handle")
    assert isinstance(e.value, HandleError) and isinstance(e.value, ValueError)
    assert "not a handle" in str(e.value)


def test_a_request_without_authorization_is_a_rocketstore_error():
    with pytest.raises(RocketStoreError) as e:
        auth.verify({"AK": "SK"}, {"x-mq-date-time": "20240101T000000Z"})
    assert isinstance(e.value, auth.AuthError)


def test_a_message_the_proxy_refuses_is_a_rocketstore_error_with_its_code():
    with pytest.raises(RocketStoreError) as e:
        convert.to_store(pb.Message(topic=pb.Resource(name="T"), body=b""), 4 << 20)
    assert isinstance(e.value, convert.ConvertError) and e.value.code == pb.Code.MESSAGE_BODY_EMPTY


def test_every_exception_class_of_serve_and_broker_is_a_rocketstore_error():
    import importlib
    import inspect

    names = [
        (p, f[:-3]) for p, d in PACKAGES.items() for f in os.listdir(d) if f.endswith(".py") and f != "__init__.py"
    ]
    found = []
    for package, name in names:
        module = importlib.import_module(f"rocketstore.{package}.{name}")
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == module.__name__ and issubclass(cls, BaseException):
                found.append(cls)
                assert issubclass(cls, RocketStoreError), f"{cls.__module__}.{cls.__name__}"
    assert {c.__name__ for c in found} >= {"AuthError", "HandleError", "ConvertError"}


# ---------------------------------------------------------------- private names
def _private_reaches(path: str) -> list[str]:
    """`x._name` where x is not self or cls (ruff's SLF001): a module reaching into another object's
    private names."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        name = node.attr
        if not name.startswith("_") or (name.startswith("__") and name.endswith("__")):
            continue
        owner = node.value
        if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
            continue
        if isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "super":
            continue
        out.append(f"{os.path.basename(path)}:{node.lineno}: {ast.unparse(node)}")
    return out


def test_no_serve_or_broker_module_reaches_into_another_objects_private_names():
    reaches = []
    for d in PACKAGES.values():
        for f in sorted(os.listdir(d)):
            if f.endswith(".py"):
                reaches += _private_reaches(os.path.join(d, f))
    assert reaches == []


# ---------------------------------------------------------------- background loops
def _store(tmp_path):
    from rocketstore import MessageStore
    from rocketstore.config.store_config import StoreConfig

    return MessageStore.open(str(tmp_path / "store"), StoreConfig(mapped_file_size_commit_log=1 << 20))


def test_serve_background_loops_are_service_threads_joined_at_stop(tmp_path):
    import threading

    from rocketstore.grpc.service import MessagingService, ServeConfig
    from rocketstore.services.service_thread import ServiceThread

    names = {"transaction-check", "delay-delivery", "renewal"}
    with _store(tmp_path) as store:
        svc = MessagingService(store, ServeConfig())
        try:
            for service in (svc.tx, svc.delay, svc.renew):
                assert isinstance(service, ServiceThread) and service.running
            assert names <= {t.name for t in threading.enumerate()}
        finally:
            svc.stop()
        assert not names & {t.name for t in threading.enumerate()}  # stop() waited for each thread
        assert not any(s.running for s in (svc.tx, svc.delay, svc.renew))


def test_a_failing_transaction_check_round_is_logged_and_checking_goes_on(tmp_path, caplog):
    import queue

    from rocketstore.formats import record as R
    from rocketstore.message import Message
    from rocketstore.broker.transaction import Transactions
    from rocketstore.grpc.transactions_grpc import grpc_checker

    outbox = queue.Queue()
    calls = []

    def producers(topic):  # the client registry fails the first time it is asked
        calls.append(topic)
        if len(calls) == 1:
            raise RuntimeError("registry unavailable")
        return [outbox]

    extra = {"transactionTimeOut": "0", "transactionCheckInterval": "0"}
    with _store(tmp_path) as store:
        tx = Transactions(store, extra)
        tx.add_checker(grpc_checker(producers))
        m = Message(
            topic="T",
            body=b"t",
            sys_flag=R.TRANSACTION_PREPARED_TYPE,
            properties={"UNIQ_KEY": "ID0", "PGROUP": "T", "TRAN_MSG": "true"},
            born_timestamp=1,
        )
        assert tx.prepare(m, 0).ok
        tx.start()
        try:
            cmd = outbox.get(timeout=30).recover_orphaned_transaction_command  # a later round got through
        finally:
            tx.stop()
    assert cmd.transaction_id == "ID0" and len(calls) >= 2
    assert any("registry unavailable" in (r.exc_text or "") for r in caplog.records)


def test_stopping_renewal_clears_every_registered_message():
    from rocketstore.broker.pop import Handle
    from rocketstore.grpc.renew import RenewManager
    from rocketstore.grpc.service import ServeConfig

    changed = []
    config = ServeConfig()
    rm = RenewManager(
        lambda group, topic, h, ms: changed.append((group, topic, h.offset, ms)), lambda client: True, config
    )
    far = Handle(7, 2**60, 60_000, 0, "0", "b", 0, 7).encode()  # not due for renewal
    rm.add("c1", "g", "T", "MSGID", far, 0)
    rm.start()
    rm.stop()
    assert changed == [("g", "T", 7, config.invisible_ms_when_clear)] and rm.count() == 0
