import unittest


class SmokeTest(unittest.TestCase):
    def test_import(self):
        import shout.words  # noqa: F401
