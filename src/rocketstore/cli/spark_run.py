"""What every Spark-run command (`rebuild --engine spark`, `archive`, `archive --watch`) does around its job:
its --master and --spark-conf, pyspark checked for before anything starts, then one session: started (said
at once: Spark takes seconds to start), its tasks shown, a failure told in one line, stopped at the end
whatever happened."""

from __future__ import annotations

import importlib.util
import re
from contextlib import contextmanager

from ..errors import RocketStoreError
from . import main as M
from .progress import Phases, SparkTasks

SPARK_MASTER = "local[*]"


def spark_properties(pairs: tuple[str, ...]) -> dict[str, str]:
    """--spark-conf KEY=VALUE pairs as a dict (spark-submit's --conf: the first '=' splits)."""
    props = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq or not key.strip():
            M.fail(f"--spark-conf {pair!r}: expected KEY=VALUE (a Spark property, e.g. spark.executor.memory=2g)")
        props[key.strip()] = value
    return props


def require_pyspark(needs: str, hint: str = "") -> None:
    """Fail with `needs` ("archive needs pyspark") and `hint` when pyspark is not installed, without importing
    it: that alone takes a while."""
    if importlib.util.find_spec("pyspark") is None:
        M.fail(f"{needs} (not installed){hint}")


@contextmanager
def spark_session(master: str | None, props: dict[str, str], shown: Phases, path: str, needs: str, hint: str = ""):
    """`with spark_session(...) as spark:` runs a job on a session of its own, shown on `shown`: a store's
    error, an OSError (named by `path` when it names no file), a failed Spark job each end the command with
    one line; `needs` (and `hint`) say what is missing when pyspark does not import."""
    master = master or SPARK_MASTER
    spark = None
    try:
        shown.phase(f"starting Spark ({master})...")
        import rocketstore.spark as rs

        spark = rs.session(master, conf=props)
        with SparkTasks(spark.sparkContext, shown):
            yield spark
    except ImportError as e:
        M.fail(f"{needs} ({e}){hint}")
    except OSError as e:
        M.fail(M.os_problem(e, path))
    except (RocketStoreError, ValueError) as e:
        M.fail(str(e))
    except Exception as e:
        if not type(e).__module__.startswith(("pyspark", "py4j")):
            raise
        M.fail(spark_failure(e))
    finally:
        if spark is not None:
            shown.phase("stopping Spark")
            spark.stop()


_ERROR_LINE = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?(\w*(?:Error|Exception)): (.+)$")


def spark_failure(e: BaseException) -> str:
    """A failed Spark job as the one line that matters: the last "SomeError: message" line (a Python
    worker's error, e.g. a damaged record's file and offset, comes last after its traceback), else Spark's
    first line."""
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    for line in reversed(lines):
        m = _ERROR_LINE.match(line)
        if m:
            return f"{m.group(1)}: {m.group(2)}"
    return lines[0] if lines else type(e).__name__
