"""Names a user gives, checked as RocketMQ's TopicValidator checks them (so none can leave the store dir)."""

import string

VALID_CHARS = frozenset("%|-_" + string.ascii_letters + string.digits)
TOPIC_MAX_LENGTH = 127
MAX_TOPIC_BYTES = 255  # a topic is a directory name: the file system's limit (RocketMQ's HookUtils)


def topic_problem(topic, allow_long: bool = True) -> str | None:
    """None for a good topic, else what is wrong with it."""
    if not isinstance(topic, str) or not topic.strip():
        return "the topic is blank"
    bad = sorted({c for c in topic if c not in VALID_CHARS})
    if bad:
        return f"topic {topic!r} contains illegal characters {''.join(bad)!r}; allowed: ^[%|a-zA-Z0-9_-]+$"
    if len(topic) > TOPIC_MAX_LENGTH and not allow_long:
        return f"topic {topic!r} is longer than {TOPIC_MAX_LENGTH} characters"
    if len(topic) > MAX_TOPIC_BYTES:
        return f"topic {topic!r} is longer than {MAX_TOPIC_BYTES} characters"
    return None


def group_problem(group) -> str | None:
    if not isinstance(group, str) or not group.strip():
        return "the group is blank"
    if any(c not in VALID_CHARS for c in group):
        return f"group {group!r} contains illegal characters; allowed: ^[%|a-zA-Z0-9_-]+$"
    if len(group) > 120:
        return f"group {group!r} is longer than 120 characters"
    return None
