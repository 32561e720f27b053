"""The put lane's one state object: the table in put/state.py and the C's list of fields are the same, the C
touches no private attribute, and PutLane refuses a state that is not the table's."""

import re
from pathlib import Path

import pytest

from rocketstore import MessageStore
from rocketstore.put import state as S

LANE_C = Path(__file__).resolve().parents[2] / "src" / "native" / "lane.c"


def test_the_c_reads_the_fields_of_the_table_in_its_order(native):
    assert native.PUT_STATE_FIELDS == S.FIELD_NAMES
    assert S.PutState.__slots__ == S.FIELD_NAMES
    assert len(set(S.FIELD_NAMES)) == len(S.FIELD_NAMES)


def test_every_field_is_public_and_said_what_it_is():
    for f in S.FIELDS:
        assert not f.name.startswith("_"), f.name
        assert f.set_by in ("writer", "lane"), f
        assert f.what.strip(), f


def test_the_c_names_no_private_attribute(native):
    names = native.PUT_LANE_ATTRIBUTES
    assert names and len(set(names)) == len(names)
    assert [n for n in names if n.startswith("_")] == []


def test_lane_c_reads_and_writes_attributes_only_by_its_table():
    """Every attribute access in lane.c goes through attr[A_...] (the exported table), except the state's own
    __slots__, which it compares with its field list, and the get of a dict it makes."""
    src = LANE_C.read_text()
    # the name argument of each access (a call's second argument); ll_attr, set_ll and attr_is are the lane's
    # own wrappers, whose parameter `name` is the only other name passed on
    calls = r"(PyObject_GetAttr|PyObject_SetAttr|PyObject_CallMethodNoArgs|ll_attr|set_ll|attr_is)"
    names = re.findall(calls + r"\((?:\w+(?:\([^()]*\))?|[\w>.-]+), ([^,)]+\]?)", src)
    assert len(names) >= 20
    assert [n for n in names if not n[1].startswith("attr[A_")] == [
        ("PyObject_GetAttr", "name"),
        ("PyObject_SetAttr", "name"),
        ("PyObject_GetAttr", "name"),
    ]
    assert sorted(re.findall(r"PyObject_GetAttrString\(([^;]*?)\)[ ;:]", src)) == [
        '(PyObject *)Py_TYPE(state), "__slots__"',  # the state's own field list
        'd, "get"',  # a new dict's bound get (queue_for knows dict.get by its C function)
    ]
    assert set(re.findall(r'"(_\w*)"', src)) == {"__slots__"}  # no other string literal names a private one
    assert "_populated" not in src and "_pending" not in src and "_topics" not in src and '"_host"' not in src


def test_put_lane_refuses_a_state_that_is_not_the_table(native, tmp_path):
    with MessageStore.open(tmp_path / "s") as store:
        state = store._writer.state
        assert state.missing("writer") == [] and state.missing("lane") == []
        assert store._make_lane() is not None

        class Reordered:
            __slots__ = tuple(reversed(S.FIELD_NAMES))

        with pytest.raises(TypeError):
            native.PutLane(Reordered())

        class Fewer:
            __slots__ = S.FIELD_NAMES[:-1]

        with pytest.raises(TypeError):
            native.PutLane(Fewer())

        unset = S.PutState(**{name: getattr(state, name) for name in S.FIELD_NAMES if name != "reput"})
        with pytest.raises(ValueError, match="reput"):
            native.PutLane(unset)
        with pytest.raises(TypeError, match="no field"):
            S.PutState(reputs=None)


def test_the_writer_and_the_lane_move_one_state(native, tmp_path):
    """A put through the lane moves the positions the writer reads, and a put through the writer those the
    lane reads: the writer's queue_offsets and last_physical_offset are the state's."""
    from rocketstore import Message

    with MessageStore.open(tmp_path / "s") as store:
        w, lane = store._writer, store._lane
        assert lane is not None
        assert w.put(Message("T", b"a"), 0).queue_offset == 0  # the writer takes the topic once
        r = lane.put(Message("T", b"bb"), 0)
        assert r is not None and r.queue_offset == 1 and r.queue_id == 0 and r.msg_num == 1
        assert w.queue_offsets[("T", 0)] == 2 and w.state.queue_offsets is w.queue_offsets
        assert w.last_physical_offset == r.physical_offset
        r2 = w.put(Message("T", b"c"), 0)
        assert r2.queue_offset == 2 and r2.physical_offset == r.physical_offset + r.size
        assert r.msg_id is not None and r.msg_id[:16] == r2.msg_id[:16] and r.reason is None  # the host
        w.queue_offsets = {("T", 0): 7}  # (recovery hands the writer its offsets this way)
        assert lane.put(Message("T", b"d"), 0) is None  # the queue's file is at unit 3, not 7: Python decides


def test_a_queue_of_other_than_a_dicts_get_is_called(native, tmp_path):
    """queue_of is QueueTable.get_by_key (a dict's get, looked up without a call); any other callable is called."""
    from rocketstore import Message

    with MessageStore.open(tmp_path / "s") as store:
        state = store._writer.state
        real = state.queue_of
        asked = []
        state.queue_of = lambda key: asked.append(key) or real(key)
        try:
            lane = native.PutLane(state)
            assert store._writer.put(Message("T", b"a"), 0).ok
            r = lane.put(Message("T", b"b"), 0)
            assert r is not None and r.queue_offset == 1 and asked == [("T", 0)]
        finally:
            state.queue_of = real
