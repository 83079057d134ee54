import unittest

from calc.ops import mul


class MulTest(unittest.TestCase):
    def test_mul(self):
        self.assertEqual(mul(3, 4), 12)
