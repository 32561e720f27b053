"""The store's logs: the CommitLog and the per-queue ConsumeQueues, built on files/ and formats/."""
