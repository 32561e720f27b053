"""The store: MessageStore (facade.py, RocketMQ's DefaultMessageStore) and the collaborators it delegates to:
the one-writer lock (lock.py), the topic table (topic_table.py), file sizes a config leaves open
(file_sizes.py), consumer groups' offsets (consumer.py)."""

from .facade import MessageStore

__all__ = ["MessageStore"]
