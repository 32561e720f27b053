"""One local Spark session for every Spark test (Spark starts slowly: keep these tests few)."""

import pytest


@pytest.fixture(scope="session")
def spark():
    import rocketstore.spark

    s = rocketstore.spark.session("local[2]", "rocketstore-tests")
    yield s
    s.stop()
