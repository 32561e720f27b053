"""How serve is built (issue #14): its errors are RocketStoreErrors, no module reaches into another object's
private names, and its background loops are ServiceThreads."""
import ast
import os

import pytest

from rocketstore.errors import RocketStoreError
from rocketstore.serve import auth, convert
from rocketstore.serve.pop import Handle, HandleError
from rocketstore.serve.protocol import definition_pb2 as pb

SERVE_SRC = os.path.join(os.path.dirname(__file__), "..", "..", "src", "rocketstore", "serve")


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


def test_every_exception_class_of_serve_is_a_rocketstore_error():
    import importlib
    import inspect
    names = [f[:-3] for f in os.listdir(SERVE_SRC) if f.endswith(".py") and f != "__init__.py"]
    found = []
    for name in names:
        module = importlib.import_module(f"rocketstore.serve.{name}")
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


def test_no_serve_module_reaches_into_another_objects_private_names():
    reaches = []
    for f in sorted(os.listdir(SERVE_SRC)):
        if f.endswith(".py"):
            reaches += _private_reaches(os.path.join(SERVE_SRC, f))
    assert reaches == []
