"""The compiled String.hashCode against the pure reference and against values Java prints."""

from hypothesis import given
from hypothesis import strategies as st

from rocketstore.formats.javahash import java_string_hash_py

# any code point, lone surrogates included (a str decoded with surrogatepass can hold them)
ANY_TEXT = st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=64)


@given(ANY_TEXT)
def test_same_as_reference(native, s):
    assert native.java_string_hash(s) == java_string_hash_py(s)


def test_known_java_values(native):
    # "hello".hashCode() == 99162322; "TagA" == 2598919; "" == 0; U+1F600 is the pair D83D DE00:
    # 31 * 0xD83D + 0xDE00 = 1772899
    assert native.java_string_hash("hello") == 99162322
    assert native.java_string_hash("TagA") == 2598919
    assert native.java_string_hash("") == 0
    assert native.java_string_hash("\U0001f600") == 31 * 0xD83D + 0xDE00
    # overflow wraps as Java's int: "polygenelubricants".hashCode() == Integer.MIN_VALUE
    assert native.java_string_hash("polygenelubricants") == -(2**31)
