"""The read path, ConsumeQueue -> CommitLog -> decode: getMessage's rules (get_message.py, get_plain.py for a
plain queue in one call), lookups by offset, msgId, key and time (lookups.py), long polling's wake-ups
(long_poll.py), and store-less readers of the files for tools that must not open the store (file_readers.py)."""
