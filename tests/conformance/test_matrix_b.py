"""The conformance matrix's rows (`_matrix.py`) for the columns bridge, python, acp."""

from tests.conformance._matrix import *  # noqa: F403 (the rows and the shared loop)
from tests.conformance._matrix import column_fixture

driver = column_fixture(["bridge", "python", "acp"])
