"""A store that refuses puts to one topic for now (a full disk, say): for tests that a delivery service records
its progress and moves on when a put fails."""

from rocketstore.message import PutResult


class RefusingStore:
    """Everything of `store`, but a put to `topic` answers `status` and writes nothing."""

    def __init__(self, store, topic, status):
        self._store, self._topic, self._status = store, topic, status

    def __getattr__(self, name):
        return getattr(self._store, name)

    def put(self, msg, queue_id=None):
        if msg.topic == self._topic:
            return PutResult(self._status)
        return self._store.put(msg, queue_id)
