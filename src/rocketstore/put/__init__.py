"""The put path, validate -> assign -> encode -> append -> dispatch: MessageWriter (writer.py, RocketMQ's
CommitLog.asyncPutMessage(s)), the C lane for the common message (lane.py), batch-ConsumeQueue topics
(batch_topic.py, RIP-26)."""
