"""The conformance matrix's rows (`_matrix.py`) for the columns web, cli, automation."""

from tests.conformance._matrix import *  # noqa: F403 (the rows and the shared loop)
from tests.conformance._matrix import column_fixture

driver = column_fixture(["web", "cli", "automation"])
