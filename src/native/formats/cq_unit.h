/* ConsumeQueue units (formats/cq.py, formats/batch_cq.py; RocketMQ's ConsumeQueue and BatchConsumeQueue).
 *
 * The plain unit, 20 bytes: the record's CommitLog offset 8, its size 4, the tagsCode 8 (or an ext address).
 * The batch unit (RIP-26), 46 bytes: offset 8, size 4, tagsCode 8, store time 8, base queue offset 8, batch
 * size 2, compacted offset 4, reserved 4. */
#ifndef ROCKETSTORE_FORMATS_CQ_UNIT_H
#define ROCKETSTORE_FORMATS_CQ_UNIT_H

#define CQ_UNIT 20
#define CQ_PHYS 0
#define CQ_SIZE 8
#define CQ_TAGS 12

#define BCQ_UNIT 46
#define BCQ_PHYS 0
#define BCQ_SIZE 8
#define BCQ_TAGS 12
#define BCQ_STORE_TIME 20
#define BCQ_BASE_OFFSET 28
#define BCQ_BATCH_SIZE 36
#define BCQ_COMPACTED_OFFSET 38
#define BCQ_RESERVED 42

/* a CommitLog get's cap on one pull's bytes (formats/cq.py's MAX_PULL_MSG_SIZE) */
#define MAX_PULL_MSG_SIZE (128LL * 1024 * 1024)

#endif
