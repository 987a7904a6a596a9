"""Shared fixtures for the Python compat suite: the broker address and unique topic names."""

import os
import uuid

import pytest


def pytest_addoption(parser):
    parser.addoption("--bootstrap", default=os.environ.get("COMPAT_BOOTSTRAP"),
                     help="host:port of the broker under test (or $COMPAT_BOOTSTRAP)")


@pytest.fixture(scope="session")
def bootstrap(request):
    value = request.config.getoption("--bootstrap")
    if not value:
        pytest.fail("give the broker with --bootstrap HOST:PORT or COMPAT_BOOTSTRAP")
    return value


@pytest.fixture
def topic_name(request):
    """A topic name no earlier run used, so reruns on one broker never collide."""
    def make(suffix=""):
        base = request.node.name.replace("[", "-").replace("]", "")[:60]
        return f"compat-py-{base}{suffix}-{uuid.uuid4().hex[:8]}"
    return make
