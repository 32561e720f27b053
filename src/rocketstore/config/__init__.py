"""A store's settings and the small files it keeps them in: StoreConfig (store_config.py, RocketMQ's
MessageStoreConfig and broker.conf), config/*.json and the checkpoint written atomically (files.py), broker.conf's
known names (broker_conf_names.py), topics.json (topics.py) and deletedTopics.json (deleted_topics.py)."""

from .store_config import StoreConfig

__all__ = ["StoreConfig"]
