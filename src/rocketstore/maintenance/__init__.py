"""What an operator runs on a store besides puts and gets: the checker (verify.py) and the rebuild of the
ConsumeQueues and index files from the CommitLog (rebuild.py; rebuild_swap.py: the staging directory and the
crash-safe swap both engines use)."""
