"""The put path, validate -> assign -> encode -> append -> dispatch (RocketMQ's CommitLog.asyncPutMessage(s)).

- writer.py: MessageWriter, the coordinator the store calls (put, put_batch) and the configuration it reads;
- state.py: PutState, the put path's positions and everything the C lane reads and moves, one declared table;
- checks.py: validate (what is refused, and why in words); topic.py: what is known of a topic (TopicInfo);
- encode.py: PROPERTIES bytes, props_info and tagsCodes, a batch's record layout;
- append.py: the CommitLog append and what moves after it (last offset, store time, queue offset);
- single.py: one message; batch.py: a producer batch; batch_topic.py: batch-ConsumeQueue topics (RIP-26);
- lane.py: the C lane over the PutState for the common message (src/native/lane.c).

Each module asks rocketstore.engine.native when it runs (engine.using() switches them all in the tests).
"""
