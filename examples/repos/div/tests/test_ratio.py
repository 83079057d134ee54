import unittest

from div.ratio import ratio


class RatioTest(unittest.TestCase):
    def test_ratio(self):
        self.assertEqual(ratio(7, 2), 3.5)
