"""rocketstore: Apache RocketMQ's message store, in Python, byte-compatible with RocketMQ 5.x."""

from .config.store_config import ASYNC_FLUSH, SYNC_FLUSH, StoreConfig
from .errors import (
    CorruptDataError,
    RocketStoreError,
    StoreClosedError,
    StoreLockedError,
    StoreNotWritableError,
    StoreOpenError,
)
from .formats.record import StoredMessage
from .message import GetResult, GetStatus, Message, PutBatchResult, PutResult, PutStatus
from .services.dispatch import DispatchRequest
from .store.facade import MessageStore

__all__ = [
    "MessageStore",
    "StoreConfig",
    "Message",
    "PutStatus",
    "GetStatus",
    "PutResult",
    "PutBatchResult",
    "GetResult",
    "StoredMessage",
    "DispatchRequest",
    "ASYNC_FLUSH",
    "SYNC_FLUSH",
    "RocketStoreError",
    "CorruptDataError",
    "StoreOpenError",
    "StoreLockedError",
    "StoreClosedError",
    "StoreNotWritableError",
]
__version__ = "0.1.0"
