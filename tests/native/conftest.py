import pytest

from rocketstore import engine


@pytest.fixture(scope="session")
def native():
    """The compiled module. A test taking it compares the extension with the pure reference (or checks the
    extension itself): with no extension loaded (ROCKETSTORE_PURE=1, the pure engine's pass of the suite)
    there is nothing to compare, and it is skipped saying so; test_engine checks that the build made one."""
    if engine.EXTENSION is None:
        pytest.skip(f"needs the C extension (compares it with the pure reference): none here, {engine.REASON}")
    return engine.EXTENSION
