"""The generated apache.rocketmq.v2 stubs, from the rocketmq-python-client package (`rocketmq.grpc_protocol`).

Importing `rocketmq.grpc_protocol` normally runs `rocketmq/__init__.py`, which loads the whole client and its
logging setup (it creates ~/logs/rocketmq_python/ and opens a log file there). The server needs only the stubs,
so unless the client is already imported, the parent package is stood in for by a bare module while the stubs
load, and taken out again afterwards (a later `import rocketmq` then loads the real one and reuses the stubs)."""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types


def _load():
    if "rocketmq" in sys.modules:
        return importlib.import_module("rocketmq.grpc_protocol")
    spec = importlib.util.find_spec("rocketmq")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("rocketmq-python-client is not installed (it provides rocketmq.grpc_protocol)")
    stand_in = types.ModuleType("rocketmq")
    stand_in.__path__ = list(spec.submodule_search_locations)
    sys.modules["rocketmq"] = stand_in
    try:
        return importlib.import_module("rocketmq.grpc_protocol")
    finally:
        if sys.modules.get("rocketmq") is stand_in:
            del sys.modules["rocketmq"]


_pkg = _load()
definition_pb2 = importlib.import_module("rocketmq.grpc_protocol.definition_pb2")
service_pb2 = importlib.import_module("rocketmq.grpc_protocol.service_pb2")
service_pb2_grpc = importlib.import_module("rocketmq.grpc_protocol.service_pb2_grpc")
