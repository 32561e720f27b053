"""RocketMQ's plain_acl.yml files (PlainPermissionManager.load): one file, or every .yml/.yaml under a directory
(RocketMQ's conf/acl/), into a remoting.acl.PlainAcl; `watch_files` reloads them when they change, every 5 s as
RocketMQ's AclFileWatchService looks, and a changed file that does not load leaves the ACL in force as it was.
YAML needs PyYAML; a file in JSON (JSON is YAML too) loads without it."""

from __future__ import annotations

import asyncio
import json
import logging
import os

from .acl import PlainAcl
from .acl_address import AclConfigError

log = logging.getLogger("rocketstore.remoting.acl")


def parse_plain_acl(text: str, source: str = "plain_acl.yml", acl: PlainAcl | None = None) -> PlainAcl:
    """A plain_acl.yml's text into `acl` (a new one by default). Every scalar is read as text, as SnakeYAML
    fills PlainAccessData's String fields (secretKey: 12345678 is the key "12345678")."""
    try:
        import yaml
    except ImportError:
        yaml = None
    acl = acl if acl is not None else PlainAcl()
    if yaml is None:  # JSON is YAML too: such a file still loads without PyYAML
        try:
            data = json.loads(text) if text.strip() else None
        except json.JSONDecodeError:
            raise AclConfigError(f"{source}: reading YAML needs PyYAML (pip install pyyaml)") from None
    else:
        try:
            data = yaml.load(text, Loader=yaml.BaseLoader)
        except yaml.YAMLError as e:
            raise AclConfigError(f"{source}: not valid YAML: {e}") from None
    acl.add_data(data, source)
    return acl


def acl_files(path: str) -> list[str]:
    """The files an ACL path stands for: itself, or every .yml/.yaml under a directory (conf/acl/)."""
    if not os.path.isdir(path):
        return [path]
    found = []
    for root, dirs, files in os.walk(path):
        dirs.sort()
        found.extend(os.path.join(root, f) for f in sorted(files) if f.endswith((".yml", ".yaml")))
    return found


def load_plain_acl(*paths: str) -> PlainAcl:
    """A PlainAcl from plain_acl.yml files or directories of them; a missing file is an error."""
    acl = PlainAcl()
    for path in paths:
        for name in acl_files(path):
            try:
                with open(name, encoding="utf-8") as f:
                    text = f.read()
            except OSError as e:
                raise AclConfigError(f"cannot read the ACL file {name}: {e.strerror}") from None
            parse_plain_acl(text, name, acl)
    acl.paths = tuple(paths)
    return acl


def _fingerprint(paths) -> tuple:
    out = []
    for path in paths:
        for name in acl_files(path):
            try:
                st = os.stat(name)
                out.append((name, st.st_mtime_ns, st.st_size))
            except OSError:
                out.append((name, None, None))
    return tuple(out)


async def watch_files(acl: PlainAcl, interval: float = 5.0) -> None:
    """Reload `acl` from its files whenever one changes, appears or goes (until cancelled)."""
    seen = _fingerprint(acl.paths)  # a few stat calls: taken before the first pause, so no change slips by
    while True:
        await asyncio.sleep(interval)
        now = _fingerprint(acl.paths)
        if now == seen:
            continue
        seen = now
        try:
            fresh = await asyncio.to_thread(load_plain_acl, *acl.paths)
        except AclConfigError as e:
            log.error("ACL not reloaded, the one in force is kept: %s", e)
            continue
        acl.replace(fresh)
        log.info("ACL reloaded from %s: %d account(s)", ", ".join(acl.paths), len(acl.accounts))
