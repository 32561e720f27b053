"""File handling: fixed-size memory-mapped segment files and the queue of them. No byte layouts here."""
