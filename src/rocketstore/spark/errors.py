"""The errors the Spark formats raise on purpose, each naming in one line what is wrong.

Spark shows an error raised in a Python worker as the worker formatted it, and pyspark formats it with the
whole Python traceback unless SPARK_HIDE_TRACEBACK is set in that worker (pyspark.util.
handle_worker_exception reads it when it formats). For these errors the traceback buries the one line
that matters under a screen of frames, so a PipelineError sets it as it is raised: the user sees
"[PYTHON_DATA_SOURCE_ERROR] ...: OptionError: option 'path': ... is not a store directory" and nothing else.
Tracebacks of other errors in that worker process (it may be reused) are hidden too from then on: a bug of
ours still shows its type and message, and `spark.python.worker.reuse=false` brings the frames back.
"""

import os

from ..errors import ArchiveError, RocketStoreError  # noqa: F401  (ArchiveError: the archive job's, from the base)


class PipelineError(RocketStoreError):
    def __init__(self, *args):
        super().__init__(*args)
        os.environ["SPARK_HIDE_TRACEBACK"] = "1"


class OptionError(PipelineError, ValueError):
    """A bad option of a rocketstore format; the message names it."""


class DataLossError(PipelineError):
    """Offsets a query asked for are gone (expired files cleaned): failOnDataLoss=true."""


class SinkError(PipelineError):
    """The sink cannot append: the store is locked, a put failed, a replay does not match."""
