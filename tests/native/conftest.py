import pytest

from rocketstore import engine


@pytest.fixture(scope="session")
def native():
    """The compiled module. Tests that compare it with the pure reference need it: under ROCKETSTORE_PURE=1
    (the pure engine's CI pass) there is nothing to compare, and test_engine checks that the build made it."""
    if engine.native is None:
        pytest.skip(f"no native engine: {engine.REASON}")
    return engine.native
