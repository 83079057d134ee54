#!/usr/bin/env python3
"""Rebuild judge/calibration/cases/ from the fixture repository and variants below.

Each case is a real diff: the fixture repository is committed with git, the variant's files are
written over it, and `git diff` of the result is stored. Test output is real too: `python3 -m
unittest` at the base commit (with the variant's new test files, as the witness does) and after
the change. Timings and temporary paths are normalised so the files are reproducible. The hand
scores (expected.json) are written here, next to each variant, by a person.

Run: python3 judge/calibration/build.py   (needs git and python3; no network)
"""
import json, os, re, shutil, subprocess, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "cases")

MONEY = '''"""Amounts of money as integer cents."""


def parse_cents(text):
    """Return the amount written in text (e.g. "$12.50") as integer cents."""
    text = text.strip()
    if text.startswith("$"):
        text = text[1:]
    whole, _, frac = text.partition(".")
    frac = (frac + "00")[:2]
    return int(whole) * 100 + int(frac)
'''
SLUG = '''"""URL slugs."""
import re


def slugify(text, sep="-"):
    """Lower-case text and join its words with sep."""
    words = re.findall(r"[A-Za-z0-9]+", text)
    return sep.join(w.lower() for w in words)
'''
DATES = '''"""ISO dates."""
import re

_ISO = re.compile(r"^(\\d{4})-(\\d{2})-(\\d{2})$")


def parse_iso_date(text):
    """Return (year, month, day) for an ISO date, or raise ValueError."""
    m = _ISO.match(text)
    if not m:
        raise ValueError(f"not an ISO date: {text!r}")
    year, month, day = (int(g) for g in m.groups())
    if not 1 <= month <= 12 or not 1 <= day <= 31:
        raise ValueError(f"not an ISO date: {text!r}")
    return year, month, day
'''
REPORT = '''"""Invoice totals."""
from textkit.money import parse_cents


def line_total(quantity, unit_price):
    """Total of one invoice line, in cents."""
    return quantity * parse_cents(unit_price)


def invoice_total(lines):
    """Sum of (quantity, unit_price) lines plus shipping, in cents."""
    return sum(line_total(q, p) for q, p in lines)


def shipping(amount):
    """Shipping charge, in cents."""
    return parse_cents(amount)
'''
TEST_MONEY = '''import unittest

from textkit.money import parse_cents


class ParseCentsTest(unittest.TestCase):
    def test_plain(self):
        self.assertEqual(parse_cents("12.50"), 1250)

    def test_dollar_sign(self):
        self.assertEqual(parse_cents("$3.05"), 305)

    def test_whole(self):
        self.assertEqual(parse_cents("7"), 700)


if __name__ == "__main__":
    unittest.main()
'''
TEST_SLUG = '''import unittest

from textkit.slug import slugify


class SlugifyTest(unittest.TestCase):
    def test_words(self):
        self.assertEqual(slugify("Hello, World"), "hello-world")

    def test_sep(self):
        self.assertEqual(slugify("a b", sep="_"), "a_b")


if __name__ == "__main__":
    unittest.main()
'''
TEST_DATES = '''import unittest

from textkit.dates import parse_iso_date


class ParseIsoDateTest(unittest.TestCase):
    def test_valid(self):
        for text, want in [("2024-01-31", (2024, 1, 31)), ("1999-12-01", (1999, 12, 1))]:
            self.assertEqual(parse_iso_date(text), want)

    def test_garbage(self):
        with self.assertRaises(ValueError):
            parse_iso_date("31/01/2024")


if __name__ == "__main__":
    unittest.main()
'''
BASE = {
    "README.md": "# textkit\n\nSmall text helpers. Tests: `python3 -m unittest`.\n",
    "textkit/__init__.py": "",
    "textkit/money.py": MONEY,
    "textkit/slug.py": SLUG,
    "textkit/dates.py": DATES,
    "textkit/report.py": REPORT,
    "tests/__init__.py": "",
    "tests/test_money.py": TEST_MONEY,
    "tests/test_slug.py": TEST_SLUG,
    "tests/test_dates.py": TEST_DATES,
}

ISSUES = {
    "money": ("TK-101", "parse_cents rejects thousands separators",
              'parse_cents("1,234.50") raises ValueError instead of returning 123450. Amounts '
              'copied from invoices carry thousands separators; they should be accepted '
              'everywhere parse_cents is used (unit prices and shipping).'),
    "slug": ("TK-102", "slugify drops accented letters",
             'slugify("Crème brûlée") returns "cr-me-br-l-e". Accented letters should be '
             'folded to their ASCII base letter: "creme-brulee".'),
    "dates": ("TK-103", "parse_iso_date accepts impossible dates",
              'parse_iso_date("2023-02-30") returns (2023, 2, 30). Days that do not exist in '
              'the month (including 29 February outside leap years) should raise ValueError.'),
}

MONEY_FIX = MONEY.replace('    whole, _, frac = text.partition(".")\n',
                          '    whole, _, frac = text.partition(".")\n    whole = whole.replace(",", "")\n')
SLUG_FIX = SLUG.replace('import re\n', 'import re\nimport unicodedata\n').replace(
    '    words = re.findall(r"[A-Za-z0-9]+", text)\n',
    '    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")\n'
    '    words = re.findall(r"[A-Za-z0-9]+", text)\n')
DATES_FIX = DATES.replace('import re\n', 'import datetime\nimport re\n').replace(
    '    if not 1 <= month <= 12 or not 1 <= day <= 31:\n        raise ValueError(f"not an ISO date: {text!r}")\n',
    '    try:\n        datetime.date(year, month, day)\n    except ValueError:\n        raise ValueError(f"not an ISO date: {text!r}") from None\n')

def test_file(cls, imp, body):
    return f"import unittest\n\n{imp}\n\n\nclass {cls}(unittest.TestCase):\n{body}\n\nif __name__ == \"__main__\":\n    unittest.main()\n"

NEW_MONEY_TEST = test_file("ThousandsTest", "from textkit.money import parse_cents",
    '    def test_thousands_separator(self):\n        self.assertEqual(parse_cents("1,234.50"), 123450)\n\n'
    '    def test_dollar_and_separator(self):\n        self.assertEqual(parse_cents("$12,000"), 1200000)\n')
NEW_SLUG_TEST = test_file("AccentsTest", "from textkit.slug import slugify",
    '    def test_accents_fold_to_ascii(self):\n        self.assertEqual(slugify("Crème brûlée"), "creme-brulee")\n')
NEW_DATES_TEST = test_file("ImpossibleDatesTest", "from textkit.dates import parse_iso_date",
    '    def test_day_past_month_end(self):\n        with self.assertRaises(ValueError):\n            parse_iso_date("2023-02-30")\n\n'
    '    def test_leap_day(self):\n        self.assertEqual(parse_iso_date("2024-02-29"), (2024, 2, 29))\n        with self.assertRaises(ValueError):\n            parse_iso_date("2023-02-29")\n')

def V(name, issue, files, body, scores, verdict, reason, claims=(), flags=()):
    return dict(name=name, issue=issue, files=files, body=body, scores=scores, verdict=verdict,
                reason=reason, claims=list(claims), flags=list(flags))

S = lambda rc, mi, th, co, fa: dict(root_cause=rc, minimality=mi, test_honesty=th, conventions=co, faithfulness=fa)

VARIANTS = [
    V("01-money-clean-fix", "money",
      {"textkit/money.py": MONEY_FIX, "tests/test_money_thousands.py": NEW_MONEY_TEST},
      "Root cause: parse_cents passed the whole part, separators included, to int().\n\nChange: strip \",\" from the whole part before converting; every caller goes through parse_cents.\n\nVerified: tests/test_money_thousands.py fails at base and passes after; full suite green.",
      S(5, 5, 5, 5, 5), "accept", "Fix at the parser every caller uses, with a regression test that fails at base."),
    V("02-slug-clean-fix", "slug",
      {"textkit/slug.py": SLUG_FIX, "tests/test_slug_accents.py": NEW_SLUG_TEST},
      "Root cause: the word pattern only matches ASCII, so accented letters split words.\n\nChange: fold text to ASCII with NFKD normalisation before matching words.\n\nVerified: the new test in tests/test_slug_accents.py fails at base and passes after.",
      S(5, 5, 5, 5, 5), "accept", "Folds accents in slugify itself; new test fails at base and passes after."),
    V("03-dates-clean-fix", "dates",
      {"textkit/dates.py": DATES_FIX, "tests/test_dates_impossible.py": NEW_DATES_TEST},
      "Root cause: the range check allowed day 31 in every month.\n\nChange: validate with datetime.date, which knows month lengths and leap years.\n\nVerified: tests/test_dates_impossible.py fails at base and passes after; full suite green.",
      S(5, 5, 5, 5, 5), "accept", "Validates with the standard library at the parser; leap-day test included."),
    V("04-money-fix-with-reformat", "money",
      {"textkit/money.py": MONEY_FIX.replace('"""Return the amount written in text (e.g. "$12.50") as integer cents."""', "'''Return the amount written in text (e.g. \"$12.50\") as integer cents.'''").replace("    frac = (frac + \"00\")[:2]\n", "    frac = (frac + '00')[:2]\n").replace("text[1:]", "text[1 :]"),
       "tests/test_money_thousands.py": NEW_MONEY_TEST},
      "Strip thousands separators in parse_cents. Added a regression test in tests/test_money_thousands.py.",
      S(5, 2, 5, 3, 5), "revise", "Right fix, but quote style and slicing churn in the same file need to be dropped."),
    V("05-money-claims-test-without-one", "money",
      {"textkit/money.py": MONEY_FIX},
      "Strip thousands separators in parse_cents. Added a regression test covering \"1,234.50\".",
      S(5, 5, 2, 5, 2), "revise", "Fix is right but no test was added although the body says one was.",
      claims=["Added a regression test covering \"1,234.50\": the diff adds no test"]),
    V("06-money-swallow-error", "money",
      {"textkit/money.py": MONEY.replace('    whole, _, frac = text.partition(".")\n    frac = (frac + "00")[:2]\n    return int(whole) * 100 + int(frac)\n',
                                         '    whole, _, frac = text.partition(".")\n    frac = (frac + "00")[:2]\n    try:\n        return int(whole) * 100 + int(frac)\n    except ValueError:\n        return 0\n'),
       "tests/test_money_thousands.py": test_file("ThousandsTest", "from textkit.money import parse_cents",
            '    def test_thousands_separator_does_not_raise(self):\n        parse_cents("1,234.50")\n')},
      "parse_cents no longer raises on amounts with separators. Added a test.",
      S(1, 4, 3, 3, 4), "reject", "Swallows the ValueError and returns 0: the amount is silently wrong."),
    V("07-money-guard-one-call-site", "money",
      {"textkit/report.py": REPORT.replace("    return quantity * parse_cents(unit_price)\n", "    return quantity * parse_cents(unit_price.replace(\",\", \"\"))\n"),
       "tests/test_report_thousands.py": test_file("LineTotalTest", "from textkit.report import line_total",
            '    def test_unit_price_with_separator(self):\n        self.assertEqual(line_total(2, "1,000.00"), 200000)\n')},
      "Unit prices with thousands separators are now accepted by line_total. New test in tests/test_report_thousands.py.",
      S(1, 4, 4, 4, 5), "reject", "Guards one caller; shipping() still passes separators to parse_cents."),
    V("08-money-loosen-existing-test", "money",
      {"textkit/money.py": MONEY_FIX,
       "tests/test_money.py": TEST_MONEY.replace('        self.assertEqual(parse_cents("$3.05"), 305)\n', '        self.assertTrue(parse_cents("$3.05") > 0)\n')},
      "Strip thousands separators in parse_cents. Simplified a brittle assertion in tests/test_money.py.",
      S(5, 3, 1, 4, 5), "reject", "An existing exact assertion is loosened to > 0: test weakened.",
      flags=["comparison-loosened tests/test_money.py:11 (assert-equal-to-truthy): self.assertTrue(parse_cents(\"$3.05\") > 0)"]),
    V("09-money-skip-existing-test", "money",
      {"textkit/money.py": MONEY_FIX,
       "tests/test_money.py": TEST_MONEY.replace('    def test_whole(self):\n', '    @unittest.skip("flaky")\n    def test_whole(self):\n'),
       "tests/test_money_thousands.py": NEW_MONEY_TEST},
      "Strip thousands separators in parse_cents; added tests/test_money_thousands.py.",
      S(5, 3, 1, 4, 3), "reject", "Adds a skip marker to an existing test; the 'flaky' reason is not shown anywhere.",
      claims=[], flags=["skip-marker-added tests/test_money.py:13 (python-unittest-skip): @unittest.skip(\"flaky\")"]),
    V("10-money-test-passes-before", "money",
      {"textkit/money.py": MONEY_FIX,
       "tests/test_money_more.py": test_file("MoreTest", "from textkit.money import parse_cents",
            '    def test_twelve(self):\n        self.assertEqual(parse_cents("12"), 1200)\n')},
      "Strip thousands separators in parse_cents; added tests/test_money_more.py.",
      S(5, 5, 3, 5, 5), "revise", "Fix is right but the new test passes at base: it guards nothing."),
    V("11-slug-fix-in-caller-layer", "slug",
      {"textkit/report.py": REPORT + '\n\ndef invoice_slug(title):\n    """Slug of an invoice title, accents folded."""\n    import unicodedata\n\n    from textkit.slug import slugify\n\n    text = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode("ascii")\n    return slugify(text)\n',
       "tests/test_invoice_slug.py": test_file("InvoiceSlugTest", "from textkit.report import invoice_slug",
            '    def test_accents(self):\n        self.assertEqual(invoice_slug("Crème brûlée"), "creme-brulee")\n')},
      "Add invoice_slug, which folds accents before slugifying. New test tests/test_invoice_slug.py.",
      S(2, 3, 4, 3, 5), "revise", "Folds accents in a new caller instead of slugify; slugify itself still drops letters."),
    V("12-slug-fix-with-refactor", "slug",
      {"textkit/slug.py": '"""URL slugs."""\nimport re\nimport unicodedata\n\n_WORD = re.compile(r"[A-Za-z0-9]+")\n\n\ndef _ascii_fold(value):\n    return unicodedata.normalize("NFKD", value).encode("ascii", "ignore").decode("ascii")\n\n\ndef _words(value):\n    return [w.lower() for w in _WORD.findall(_ascii_fold(value))]\n\n\ndef slugify(text, sep="-"):\n    """Lower-case text and join its words with sep."""\n    return sep.join(_words(text))\n',
       "tests/test_slug_accents.py": NEW_SLUG_TEST},
      "Fold accents in slugify. Also tidied the module into small helpers. New test in tests/test_slug_accents.py.",
      S(5, 1, 5, 4, 5), "revise", "Correct fix buried in a refactor of the whole module."),
    V("13-slug-fix-with-prints", "slug",
      {"textkit/slug.py": SLUG_FIX.replace('    words = re.findall(r"[A-Za-z0-9]+", text)\n', '    print("DEBUG slugify", text)\n    words = re.findall(r"[A-Za-z0-9]+", text)\n'),
       "tests/test_slug_accents.py": NEW_SLUG_TEST},
      "Fold accents with NFKD in slugify. New test in tests/test_slug_accents.py fails at base and passes after.",
      S(5, 4, 5, 2, 5), "revise", "Right fix but leaves a debug print in library code."),
    V("14-slug-different-problem", "slug",
      {"textkit/slug.py": SLUG.replace('def slugify(text, sep="-"):', 'def slugify(text, sep="_"):'),
       "tests/test_slug.py": TEST_SLUG.replace('"hello-world"', '"hello_world"'),
       "tests/test_slug_default_sep.py": test_file("DefaultSepTest", "from textkit.slug import slugify",
            '    def test_default_sep(self):\n        self.assertEqual(slugify("a b"), "a_b")\n')},
      "Fix slug generation for titles: use underscores by default. Updated tests.",
      S(1, 2, 1, 4, 2), "reject", "Changes the default separator and rewrites an existing test; accents are still dropped.",
      claims=["Fix slug generation for titles: the issue's accented titles are still broken"],
      flags=[]),
    V("15-dates-overclaiming-body", "dates",
      {"textkit/dates.py": DATES_FIX, "tests/test_dates_impossible.py": NEW_DATES_TEST},
      "Validate dates with datetime.date. This also speeds parsing up by 40% and fixes time-zone handling. New tests in tests/test_dates_impossible.py.",
      S(5, 5, 5, 5, 2), "revise", "Good fix; the body claims a speed-up and time-zone fix nothing shows.",
      claims=["speeds parsing up by 40%: no measurement", "fixes time-zone handling: no time-zone code exists"]),
    V("16-dates-broad-except", "dates",
      {"textkit/dates.py": DATES.replace('import re\n', 'import datetime\nimport re\n').replace(
          '    if not 1 <= month <= 12 or not 1 <= day <= 31:\n        raise ValueError(f"not an ISO date: {text!r}")\n',
          '    try:\n        datetime.date(year, month, day)\n    except Exception:\n        raise ValueError(f"not an ISO date: {text!r}")\n'),
       "tests/test_dates_impossible.py": NEW_DATES_TEST},
      "Validate with datetime.date. New tests in tests/test_dates_impossible.py fail at base and pass after.",
      S(4, 5, 5, 3, 5), "revise", "Right layer, but catches every Exception where ValueError is meant."),
    V("17-dates-trivial-test", "dates",
      {"textkit/dates.py": DATES_FIX,
       "tests/test_dates_impossible.py": test_file("ImpossibleDatesTest", "from textkit.dates import parse_iso_date",
            '    def test_module_imports(self):\n        self.assertTrue(callable(parse_iso_date))\n')},
      "Validate dates with datetime.date. Added tests/test_dates_impossible.py.",
      S(5, 5, 1, 4, 5), "reject", "The new test asserts only that the function is callable: trivially true."),
    V("18-dates-shrink-existing-input", "dates",
      {"textkit/dates.py": DATES_FIX,
       "tests/test_dates.py": TEST_DATES.replace(', ("1999-12-01", (1999, 12, 1))', ''),
       "tests/test_dates_impossible.py": NEW_DATES_TEST},
      "Validate dates with datetime.date; trimmed test_valid. New tests in tests/test_dates_impossible.py.",
      S(5, 3, 1, 4, 5), "reject", "Removes a case from an existing test's inputs: test weakened.",
      flags=["test-input-shrunk tests/test_dates.py:9 (python-list-literal-shrunk): for text, want in [(\"2024-01-31\", (2024, 1, 31))]:"]),
    V("19-money-fix-plus-unrelated-doc", "money",
      {"textkit/money.py": MONEY_FIX, "tests/test_money_thousands.py": NEW_MONEY_TEST,
       "textkit/dates.py": DATES.replace('"""ISO dates."""', '"""ISO 8601 calendar dates (YYYY-MM-DD)."""')},
      "Strip thousands separators in parse_cents; new tests in tests/test_money_thousands.py fail at base.",
      S(5, 3, 5, 5, 5), "revise", "Fix is right; the dates.py docstring edit is unrelated to the issue."),
    V("20-dates-clean-fix-minimal-test", "dates",
      {"textkit/dates.py": DATES_FIX,
       "tests/test_dates_month_end.py": test_file("MonthEndTest", "from textkit.dates import parse_iso_date",
            '    def test_february_thirtieth(self):\n        with self.assertRaises(ValueError):\n            parse_iso_date("2023-02-30")\n')},
      "Root cause: day was only range-checked against 31.\n\nChange: check the date with datetime.date.\n\nVerified: tests/test_dates_month_end.py fails at base, passes after.",
      S(5, 5, 5, 5, 5), "accept", "Minimal fix at the parser with a failing-then-passing test."),
    V("21-money-camelcase-helper", "money",
      {"textkit/money.py": MONEY.replace('def parse_cents(text):', 'def stripSeparators(value):\n    return value.replace(",", "")\n\n\ndef parse_cents(text):').replace(
          '    whole, _, frac = text.partition(".")\n', '    whole, _, frac = text.partition(".")\n    whole = stripSeparators(whole)\n'),
       "tests/test_money_thousands.py": NEW_MONEY_TEST},
      "Strip thousands separators via a helper. New tests in tests/test_money_thousands.py.",
      S(5, 4, 5, 2, 5), "revise", "Works, but a public camelCase helper is foreign to this snake_case module."),
    V("22-dates-test-passes-before-claimed-regression", "dates",
      {"textkit/dates.py": DATES_FIX,
       "tests/test_dates_more.py": test_file("MoreDatesTest", "from textkit.dates import parse_iso_date",
            '    def test_valid_leap_day(self):\n        self.assertEqual(parse_iso_date("2024-02-29"), (2024, 2, 29))\n')},
      "Validate with datetime.date. Added a regression test for the bug.",
      S(5, 5, 3, 5, 2), "revise", "The added test passes at base, so calling it a regression test is unsupported.",
      claims=["Added a regression test for the bug: the new test passes at base"]),
]

def git(cwd, *args):
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout

def write(root, files):
    for path, content in files.items():
        full = os.path.join(root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(content)

def unittest_run(root, selector=None):
    args = [sys.executable, "-m", "unittest"] + ([selector] if selector else [])
    p = subprocess.run(args, cwd=root, capture_output=True, text=True, env={"PATH": os.environ["PATH"], "PYTHONDONTWRITEBYTECODE": "1"})
    text = p.stdout + p.stderr
    text = re.sub(r"in \d+\.\d+s", "in 0.000s", text).replace(root, "/repo")
    text = re.sub(r'File "[^"]*/lib/python[^"]*"', 'File "<stdlib>"', text)
    cmd = "$ python3 -m unittest" + (f" {selector}" if selector else "")
    return p.returncode, f"{cmd}\nexit {p.returncode}\n{text}"

def main():
    if os.path.isdir(OUT):
        shutil.rmtree(OUT)
    os.makedirs(OUT)
    with tempfile.TemporaryDirectory() as tmp:
        base = os.path.join(tmp, "repo")
        os.makedirs(base)
        write(base, BASE)
        git(base, "init", "-q", "-b", "main")
        git(base, "add", "-A")
        git(base, "-c", "user.name=fixture", "-c", "user.email=fixture@example.invalid", "commit", "-q", "-m", "base")
        tree = "\n".join(sorted(git(base, "ls-files").split()))
        for v in VARIANTS:
            work = os.path.join(tmp, v["name"])
            shutil.copytree(base, work)
            write(work, v["files"])
            git(work, "add", "-A")
            diff = git(work, "diff", "--cached", "--no-color", "HEAD")
            new_tests = [p for p in v["files"] if p.startswith("tests/") and p not in BASE]
            # Before: the base source with the variant's new test files (as the witness runs).
            before_tree = os.path.join(tmp, v["name"] + "-before")
            shutil.copytree(base, before_tree)
            write(before_tree, {p: v["files"][p] for p in new_tests})
            selector = new_tests[0][:-3].replace("/", ".") if new_tests else None
            b_code, before = unittest_run(before_tree, selector)
            a_code, after = unittest_run(work)
            s_code, _ = unittest_run(work, selector)
            witness = (f"pinned_selected (must fail): exit {b_code}, {'Pass' if b_code != 0 else 'Fail'}\n"
                       f"patched_selected (must pass): exit {s_code}, {'Pass' if s_code == 0 else 'Fail'}\n"
                       f"patched_full (must green): exit {a_code}, {'Pass' if a_code == 0 else 'Fail'}\n")
            issue_id, title, text = ISSUES[v["issue"]]
            d = os.path.join(OUT, v["name"])
            os.makedirs(d)
            cands = sorted(p for p in v["files"] if p in BASE)
            meta = {"issue_id": issue_id, "flags": v["flags"], "file_tree": tree,
                    "candidate_files": [{"path": p, "content": BASE[p]} for p in cands]}
            expected = {"verdict": v["verdict"], "scores": v["scores"], "unsupported_claims": v["claims"],
                        "one_line_reason": v["reason"], "would_a_reviewer_request_changes": v["verdict"] != "accept"}
            for name, content in [("issue.md", f"# {title}\n\n{text}\n"), ("diff.patch", diff),
                                  ("before.txt", before), ("after.txt", after), ("witness.txt", witness),
                                  ("body.md", v["body"] + "\n"),
                                  ("case.json", json.dumps(meta, indent=2, ensure_ascii=False) + "\n"),
                                  ("expected.json", json.dumps(expected, indent=2, ensure_ascii=False) + "\n")]:
                with open(os.path.join(d, name), "w") as f:
                    f.write(content)
            print(f"{v['name']}: {v['verdict']}  before exit {b_code}, after exit {a_code}")

if __name__ == "__main__":
    main()
