/* An inner batch's messages (formats/inner_batch.py; RocketMQ's MessageDecoder.encodeMessages): TOTALSIZE 4,
 * MAGICCODE 4 (0), BODYCRC 4 (0), FLAG 4, BODYLEN 4, BODY, PROPERTIESLEN 2, PROPERTIES. */
#ifndef ROCKETSTORE_FORMATS_INNER_BATCH_H
#define ROCKETSTORE_FORMATS_INNER_BATCH_H

#define INNER_TOTALSIZE 0
#define INNER_MAGIC 4
#define INNER_BODYCRC 8
#define INNER_FLAG 12
#define INNER_BODYLEN 16
#define INNER_BODY 20
#define INNER_FIXED (INNER_BODY + 2)   /* 22: a message with an empty body and no properties */

#endif
