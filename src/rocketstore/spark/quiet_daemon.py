"""PySpark's worker daemon, less one traceback: run as spark.python.daemon.module by session().

When Spark needs no more rows from a task (df.show(3), df.limit(n)), the JVM closes the task's socket while
the Python worker still writes batches; the worker's last flush then fails with BrokenPipeError and
pyspark.daemon prints its traceback to the console, although nothing went wrong. This module runs the very
same daemon, with the one difference that a worker whose connection the JVM closed ends quietly: it is not
reused, exactly as pyspark.daemon does when a flush fails.
"""

from pyspark import daemon

_worker = daemon.worker


def _quiet_worker(sock, authenticated):
    try:
        return _worker(sock, authenticated)
    except BrokenPipeError:
        return 1  # non-zero: the daemon's child exits instead of taking another task


daemon.worker = _quiet_worker

if __name__ == "__main__":
    daemon.manager()
