"""Pieces the tests of several folders share: each module is named for what it offers
and is no test module, so pytest does not collect it (tests/repo/test_test_imports.py)."""
