"""Background services and the pipelines they run: dispatch, reput, recovery."""
