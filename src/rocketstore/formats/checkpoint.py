"""The `checkpoint` file: 4096 bytes, five big-endian longs at the start, the rest zero (StoreCheckpoint)."""

from dataclasses import dataclass
from struct import Struct

from ..errors import CorruptDataError

FILE_SIZE = 4096
LAYOUT = Struct(">qqqqq")


@dataclass
class Checkpoint:
    physic_msg_timestamp: int = 0
    logics_msg_timestamp: int = 0
    index_msg_timestamp: int = 0
    master_flushed_offset: int = 0
    confirm_phy_offset: int = 0

    def min_timestamp(self) -> int:
        """StoreCheckpoint.getMinTimestamp: where abnormal recovery may start, 3 s of slack."""
        m = min(self.physic_msg_timestamp, self.logics_msg_timestamp) - 3000
        return max(m, 0)

    def min_timestamp_index(self) -> int:
        return min(self.min_timestamp(), self.index_msg_timestamp)


def encode(cp: Checkpoint) -> bytes:
    return LAYOUT.pack(
        cp.physic_msg_timestamp,
        cp.logics_msg_timestamp,
        cp.index_msg_timestamp,
        cp.master_flushed_offset,
        cp.confirm_phy_offset,
    ) + bytes(FILE_SIZE - LAYOUT.size)


def decode(data: bytes) -> Checkpoint:
    if len(data) < LAYOUT.size:
        raise CorruptDataError(f"checkpoint holds {len(data)} bytes, needs at least {LAYOUT.size}", 0)
    return Checkpoint(*LAYOUT.unpack_from(data, 0))
