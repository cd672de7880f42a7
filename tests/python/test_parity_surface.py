"""test_parity_surface.py - every public name of the five originals, checked against the
sonde.compat module that answers for it (issue 65). The originals' surfaces are facts recorded
from their source at the commits shared/reference/README.md names (tests/python/parity/NNN.json,
made by parity/record_surface.py); nothing of the originals is needed to run this.

For each module of an original, each public name must exist in its compat module; a function
or method must accept every call the original accepts, binding the same arguments (the same
positional names in the same order, the keyword-only names, *args and **kwargs where the
original has them, a default wherever the original has one and the same default where it is a
literal); a dataclass must have the same fields with the same defaults; an abstract class must
stay abstract; a property must be there. A difference kept on purpose is listed in KEPT with
its reason (docs/python.md names it too); a listed difference that no longer exists fails the
test, so the list stays true."""

import dataclasses
import glob
import importlib
import inspect
import json
import os
import sys
import unittest

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "parity")

# (facts file, "module path:Name[.member]") -> why the difference is kept.
KEPT = {}

P = inspect.Parameter
POSITIONAL = (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)


def signature_gaps(orig, fn):
    """What a call valid on the original would not bind the same way on fn: a list of
    sentences, empty when fn accepts every such call."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return []  # a C function without a signature: not checked
    ps = list(sig.parameters.values())
    if ps and ps[0].name in ("self", "cls") and not isinstance(fn, staticmethod):
        ps = ps[1:]
    mine_pos = [p for p in ps if p.kind in POSITIONAL]
    var_pos = any(p.kind == P.VAR_POSITIONAL for p in ps)
    var_kw = any(p.kind == P.VAR_KEYWORD for p in ps)
    by_name = {p.name: p for p in ps}
    gaps = []
    pos_i = 0
    for row in orig:
        name, kind = row[0], row[1]
        has_default = len(row) > 2
        if kind in ("positional_only", "positional_or_keyword"):
            if pos_i < len(mine_pos):
                mine = mine_pos[pos_i]
                if kind == "positional_or_keyword" and not name.startswith("_") and \
                        mine.name != name:
                    gaps.append("parameter %d is %r, the original's %r" % (pos_i + 1,
                                                                           mine.name, name))
            elif not var_pos:
                gaps.append("no positional parameter %d (%r)" % (pos_i + 1, name))
                mine = None
            else:
                mine = None
            pos_i += 1
        elif kind == "keyword_only":
            mine = by_name.get(name)
            if (mine is None or mine.kind in (P.POSITIONAL_ONLY, P.VAR_POSITIONAL,
                                              P.VAR_KEYWORD)) and not var_kw:
                gaps.append("no keyword %r" % name)
                mine = None
        elif kind == "var_positional":
            if not var_pos:
                gaps.append("no *%s" % name)
            continue
        else:
            if not var_kw:
                gaps.append("no **%s" % name)
            continue
        if mine is None or not has_default:
            continue
        if mine.default is P.empty:
            gaps.append("%r has no default (the original's: %r)" % (name, row[2]))
        elif not isinstance(row[2], dict) and mine.default != row[2]:
            gaps.append("%r defaults to %r, the original's to %r" % (name, mine.default,
                                                                      row[2]))
    return gaps


def class_gaps(fact, cls):
    gaps = []
    for m, mf in sorted(fact["methods"].items()):
        fn = inspect.getattr_static(cls, m, None)
        if fn is None:
            gaps.append(("." + m, "missing"))
            continue
        if isinstance(fn, (staticmethod, classmethod)):
            fn = fn.__func__
            g = signature_gaps(mf["params"], fn)
            g = signature_gaps([["cls", "positional_or_keyword"]] + mf["params"], fn) \
                if not mf.get("static") else g
        else:
            g = signature_gaps(mf["params"], getattr(cls, m))
        gaps += [("." + m, x) for x in g]
    abstract = any(mf.get("abstract") for mf in fact["methods"].values())
    if abstract and not inspect.isabstract(cls):
        gaps.append(("", "abstract in the original, can be made here"))
    for prop in fact["properties"]:
        if not isinstance(inspect.getattr_static(cls, prop, None), property):
            gaps.append(("." + prop, "no property"))
    if fact.get("dataclass"):
        if not dataclasses.is_dataclass(cls):
            gaps.append(("", "not a dataclass"))
        else:
            mine = {f.name: f for f in dataclasses.fields(cls)}
            for name, ff in sorted(fact["fields"].items()):
                f = mine.get(name)
                if f is None:
                    gaps.append(("." + name, "no field"))
                elif "default" in ff and not isinstance(ff["default"], dict) and \
                        f.default != ff["default"]:
                    gaps.append(("." + name, "defaults to %r, the original's to %r"
                                 % (f.default, ff["default"])))
                elif ("default" in ff or "default_factory" in ff) and \
                        f.default is dataclasses.MISSING and \
                        f.default_factory is dataclasses.MISSING:
                    gaps.append(("." + name, "required here, has a default in the original"))
    return gaps


def surface_gaps(facts):
    """[(where, what)] of one original: where is "module path:Name[.member]"."""
    out = []
    for path, surface in sorted(facts["surface"].items()):
        mod = importlib.import_module(facts["modules"][path])
        for name, fact in sorted(surface["names"].items()):
            where = "%s:%s" % (path, name)
            if not hasattr(mod, name):
                out.append((where, "missing from %s" % mod.__name__))
                continue
            obj = getattr(mod, name)
            if fact["kind"] == "function":
                out += [(where, g) for g in signature_gaps(fact["params"], obj)]
            elif fact["kind"] == "class":
                if not inspect.isclass(obj):
                    out.append((where, "not a class here"))
                    continue
                out += [(where + w, g) for w, g in class_gaps(fact, obj)]
        if surface["all"] is not None and hasattr(mod, "__all__"):
            for name in surface["all"]:
                if name not in mod.__all__ and hasattr(mod, name):
                    out.append(("%s:__all__" % path, "%r not in %s.__all__" % (name,
                                                                               mod.__name__)))
    return out


class Surface(unittest.TestCase):
    def test_every_public_name(self):
        files = sorted(glob.glob(os.path.join(HERE, "*.json")))
        self.assertGreaterEqual(len(files), 6)
        seen_kept = set()
        report = []
        names = 0
        for path in files:
            key = os.path.basename(path)[:-len(".json")]
            with open(path) as f:
                facts = json.load(f)
            names += sum(len(s["names"]) for s in facts["surface"].values())
            for where, what in surface_gaps(facts):
                if (key, where) in KEPT:
                    seen_kept.add((key, where))
                else:
                    report.append("%s %s: %s" % (key, where, what))
        stale = sorted(set(KEPT) - seen_kept)
        print("parity surface: %d public names of %d originals' modules checked, %d "
              "differences kept on purpose" % (names, len(files), len(seen_kept)),
              file=sys.stderr)
        self.assertEqual(report, [], "\n" + "\n".join(report))
        self.assertEqual(stale, [], "listed in KEPT but no longer different")

    def test_the_checker_sees_each_kind_of_gap(self):
        """Planted originals against planted stand-ins: each kind of difference is found, and
        a stand-in that accepts every call has none."""
        orig = [["a", "positional_or_keyword"], ["b", "positional_or_keyword", 1],
                ["c", "keyword_only", None], ["args", "var_positional"],
                ["kw", "var_keyword"]]

        def f(a, b=2, *, c=None):
            pass

        def g(x, b=1):
            pass

        def h(*args, **kwargs):
            pass

        self.assertEqual(signature_gaps(orig, f), [
            "'b' defaults to 2, the original's to 1", "no *args", "no **kw"])
        self.assertEqual(signature_gaps(orig, g), [
            "parameter 1 is 'x', the original's 'a'", "no keyword 'c'", "no *args", "no **kw"])
        self.assertEqual(signature_gaps(orig, h), [])
        self.assertEqual(signature_gaps([["b", "positional_or_keyword", 1]],
                                        lambda b: None), ["'b' has no default (the original's: 1)"])

        @dataclasses.dataclass
        class Config:
            n: int = 3
            m: int = 0

        class Stand:
            def run(self, x):
                pass

        fact = {"methods": {"run": {"params": [["x", "positional_or_keyword"]]},
                            "stop": {"params": [], "abstract": True}},
                "properties": ["path"], "fields": {}}
        self.assertEqual(class_gaps(fact, Stand), [(".stop", "missing"),
                                                   ("", "abstract in the original, can be "
                                                        "made here"),
                                                   (".path", "no property")])
        dc = {"methods": {}, "properties": [], "dataclass": True,
              "fields": {"n": {"default": 4}, "m": {"default": 0}, "k": {"default": 1}}}
        self.assertEqual(class_gaps(dc, Config), [(".k", "no field"),
                                                  (".n", "defaults to 3, the original's to 4")])


if __name__ == "__main__":
    print("parity surface on %s (Python %s)" % (sys.executable, sys.version.split()[0]),
          file=sys.stderr)
    unittest.main(verbosity=2)
