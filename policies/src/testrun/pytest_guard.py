# airlock's pytest guard (airlock_policies::testrun::PYTEST_GUARD): what `python -m pytest ARGS`
# does, run as `python -c PYTEST_GUARD REPORT ARGS`, with a guard in the process that runs the
# tests. Before any test module or conftest is imported it snapshots the functions of the
# framework's own modules (pytest's runner, reports, outcomes, raises/approx and test
# functions, and unittest.TestCase, whose cases pytest runs too). After the run it adds to
# pytest's JUnit report an `airlock-guard` property (the checks ran) and one
# `airlock-guard-violation` property per finding: a framework function that is not its own any
# more, a test whose module was not loaded from its own file, a test whose code comes from a
# source file the change touched, a plugin registered from one.
import os, sys, json, inspect
# `-m` puts the working directory itself first on the path, `-c` puts "": as `-m` does.
if sys.path and sys.path[0] == "":
    sys.path[0] = os.getcwd()
_report = sys.argv.pop(1)
sys.argv[0] = "python -m pytest"
import unittest
import pytest
import importlib
_real, _unwrap, _rel, _sep = os.path.realpath, inspect.unwrap, os.path.relpath, os.sep
_tree = _real(os.getcwd())

def _functions(owner):
    return {n: (v, getattr(v, "__code__", None)) for n, v in vars(owner).items() if callable(v)}

# (label, namespace): a module's own functions and classes, each class's own methods.
_watched = [("unittest.TestCase", unittest.TestCase), ("pytest", pytest)]
# Where pytest keeps them differs between versions (raises and approx left python_api in 8.4).
_modules = []
for _name in ("_pytest.outcomes", "_pytest.python", "_pytest.python_api", "_pytest.raises",
              "_pytest.approx", "_pytest.reports", "_pytest.runner"):
    try:
        _modules.append(importlib.import_module(_name))
    except ImportError:
        pass
for _m in _modules:
    _watched.append((_m.__name__, _m))
    for _n, _v in sorted(vars(_m).items()):
        if isinstance(_v, type) and _v.__module__ == _m.__name__:
            _watched.append(("%s.%s" % (_m.__name__, _n), _v))
_pristine = [(label, ns, _functions(ns)) for label, ns in _watched]
try:
    with open(os.path.join(os.path.dirname(_report), "changed-source.json"), encoding="utf-8") as _g:
        _changed = {_real(os.path.join(_tree, p)) for p in json.load(_g)}
except (OSError, ValueError):
    _changed = set()

class _Guard:
    def __init__(self):
        self.items = []
        self.config = None
    def pytest_configure(self, config):
        self.config = config
    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, session, config, items):
        self.items = list(items)

def _file_of(obj):
    f = getattr(obj, "__file__", None)
    if f is None:
        f = getattr(sys.modules.get(getattr(type(obj), "__module__", "")), "__file__", None)
    return _real(f) if f else None

def _check(guard):
    bad = []
    for label, ns, functions in _pristine:
        now = vars(ns)
        for n, (v, code) in sorted(functions.items()):
            w = now.get(n)
            if w is not v or getattr(w, "__code__", None) is not code:
                bad.append("%s.%s is not the framework's own" % (label, n))
    for item in guard.items:
        module = getattr(item, "module", None)
        path = getattr(item, "path", None) or getattr(item, "fspath", None)
        if module is not None and path is not None and str(path).endswith(".py"):
            f = getattr(module, "__file__", None)
            if not f:
                bad.append("%s: its module was not loaded from a file" % item.nodeid)
            elif _real(f) != _real(str(path)):
                bad.append("%s: its module was loaded from %s, not %s" % (item.nodeid, _rel(_real(f), _tree), _rel(_real(str(path)), _tree)))
        try:
            fn = _unwrap(getattr(item, "obj", None))
        except Exception:
            fn = None
        code = getattr(fn, "__code__", None)
        if code is not None and _real(code.co_filename) in _changed:
            bad.append("%s: its code comes from %s, a source file the change touched" % (item.nodeid, _rel(_real(code.co_filename), _tree)))
    if guard.config is not None:
        for name, plugin in sorted(guard.config.pluginmanager.list_name_plugin(), key=lambda p: str(p[0])):
            f = _file_of(plugin)
            if f in _changed:
                bad.append("plugin %s was registered from %s, a source file the change touched" % (name, _rel(f, _tree)))
    return bad

_guard = _Guard()
_code = pytest.main(sys.argv[1:], plugins=[_guard])
_bad = _check(_guard)
for _b in _bad:
    sys.stderr.write("airlock guard: %s\n" % _b)
# The verdict goes into the report pytest wrote (none: the broker finds no report).
import xml.etree.ElementTree as _ET
try:
    _doc = _ET.parse(_report)
except (OSError, _ET.ParseError):
    _doc = None
if _doc is not None:
    _root = _doc.getroot()
    _suite = _root if _root.tag == "testsuite" else _root.find("testsuite")
    if _suite is not None:
        _props = _suite.find("properties")
        if _props is None:
            _props = _ET.Element("properties")
            _suite.insert(0, _props)
        _ET.SubElement(_props, "property", name="airlock-guard", value="checked")
        for _b in _bad:
            _ET.SubElement(_props, "property", name="airlock-guard-violation", value=_b)
        _doc.write(_report, encoding="utf-8", xml_declaration=True)
sys.exit(int(_code))
