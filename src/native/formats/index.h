/* The IndexFile (formats/index.py; RocketMQ's IndexFile and IndexHeader): a 40-byte header, hash slots of
 * 4 bytes (the number of the slot's newest entry), then entries of 20 bytes.
 *
 * Header: beginTimestamp 8, endTimestamp 8, beginPhyOffset 8, endPhyOffset 8, hashSlotCount 4, indexCount 4.
 * Entry: keyHash 4, phyOffset 8, timeDiff (seconds since beginTimestamp) 4, prevIndexNo 4. */
#ifndef ROCKETSTORE_FORMATS_INDEX_H
#define ROCKETSTORE_FORMATS_INDEX_H

#define IDX_HEADER 40
#define IDX_BEGIN_TS 0
#define IDX_END_TS 8
#define IDX_BEGIN_PHY 16
#define IDX_END_PHY 24
#define IDX_SLOT_COUNT 32
#define IDX_COUNT 36

#define IDX_SLOT 4

#define IDX_ENTRY 20
#define IDX_E_HASH 0
#define IDX_E_PHY 4
#define IDX_E_DIFF 12
#define IDX_E_PREV 16

/* where slot s and entry n lie in a file of `slots` hash slots */
#define IDX_SLOT_AT(s) (IDX_HEADER + (s) * IDX_SLOT)
#define IDX_ENTRIES(slots) (IDX_HEADER + (slots) * IDX_SLOT)

#endif
