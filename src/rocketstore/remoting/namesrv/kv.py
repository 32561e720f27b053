"""The name server's KV config (RocketMQ's KVConfigManager): namespaces of string pairs, kept in
`kvConfig.json` as {"configTable":{namespace:{key:value}}} when a path is given (written whole on each change,
through a temporary file, so a crash leaves the old or the new table)."""

import json
import os
import threading

from .. import fastjson


class KVConfig:
    def __init__(self, path: str | None = None):
        self.path = path
        self.lock = threading.Lock()
        self.table: dict[str, dict[str, str]] = {}
        if path and os.path.exists(path):
            with open(path, "rb") as f:
                data = fastjson.loads(f.read())
            for ns, pairs in (data.get("configTable") or {}).items():
                self.table[str(ns)] = {str(k): str(v) for k, v in (pairs or {}).items()}

    def _persist(self) -> None:
        if not self.path:
            return
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        tmp = self.path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"configTable": self.table}, f, indent=1, ensure_ascii=False)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)

    def put(self, namespace: str, key: str, value: str) -> None:
        with self.lock:
            self.table.setdefault(namespace, {})[key] = value
            self._persist()

    def get(self, namespace: str, key: str) -> str | None:
        with self.lock:
            return self.table.get(namespace, {}).get(key)

    def delete(self, namespace: str, key: str) -> None:
        with self.lock:
            pairs = self.table.get(namespace)
            if pairs is not None and key in pairs:
                del pairs[key]
                self._persist()

    def namespace(self, namespace: str) -> dict[str, str] | None:
        with self.lock:
            pairs = self.table.get(namespace)
            return None if pairs is None else dict(pairs)
