"""A push consumer of the C++-core client (`rocketmq` 0.4.4, run in that client's own virtual environment) that
test_broker_kills.py keeps running across the kills and restarts of `rocketstore serve` (same name server and
broker ports each time). Usage: cpp_push_consumer.py NAMESRV GROUP TOPIC. Prints `started`, then one line per
delivery, flushed at once: `got KEY QUEUE OFFSET T` (KEY: the body up to its first `|`; T: time.monotonic()).
Every delivery is acknowledged (CONSUME_SUCCESS); the client commits offsets itself, every 5 s
(persistConsumerOffsetInterval). Runs until killed."""

import sys
import threading
import time

from rocketmq.client import PushConsumer

lock = threading.Lock()


def main() -> None:
    namesrv, group, topic = sys.argv[1:4]
    c = PushConsumer(group)
    c.set_namesrv_addr(namesrv)

    def on_message(msg):
        key = msg.body.split(b"|", 1)[0].decode()
        with lock:
            sys.stdout.write(f"got {key} {msg.queue_id} {msg.queue_offset} {time.monotonic():.4f}\n")
            sys.stdout.flush()

    c.subscribe(topic, on_message, "*")
    c.start()
    print("started", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
