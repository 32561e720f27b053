"""Pure byte layouts of RocketMQ's store files: encode/decode on bytes, no I/O, no imports of our other layers."""
