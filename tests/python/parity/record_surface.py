"""record_surface.py - records the public surface of one of the five originals as facts, for
test_parity_surface.py: every public name of each of its modules, and each class's public
methods and properties, each function's parameters (name, kind, default), each dataclass's
fields with their defaults. It reads the original's source with Python's ast (nothing of it is
imported or run, nothing of its code is kept) from a git checkout made with the tool library's
`fetch`, at the commit shared/reference/README.md names.

    python3 tests/python/parity/record_surface.py tests/python/parity/NNN.json GIT_DIR

NNN.json holds {"original": "...", "commit": C, "modules": {PATH: COMPAT_MODULE}} (PATH a .py
file in the repository at GIT_DIR; COMPAT_MODULE the sonde.compat module that answers for it);
"surface": {PATH: {"names": {...}, "all": [...]}} is written into it anew, each name's fact
being {"kind": "class"|"function"|"value"|"reexport", ...}."""

import ast
import json
import os
import subprocess
import sys


def literal(node):
    """A default's value where it is a literal (a number, text, True/False/None, a tuple or
    list of them), else {"expr": its source text}."""
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return {"expr": ast.unparse(node)}


def params(fn):
    """[[name, kind, default or absent]] of a def, self/cls left out."""
    a = fn.args
    out = []
    pos = a.posonlyargs + a.args
    firsts = len(pos) - len(a.defaults)
    for i, p in enumerate(pos):
        kind = "positional_only" if i < len(a.posonlyargs) else "positional_or_keyword"
        row = [p.arg, kind]
        if i >= firsts:
            row.append(literal(a.defaults[i - firsts]))
        out.append(row)
    if a.vararg:
        out.append([a.vararg.arg, "var_positional"])
    for p, d in zip(a.kwonlyargs, a.kw_defaults):
        out.append([p.arg, "keyword_only"] + ([] if d is None else [literal(d)]))
    if a.kwarg:
        out.append([a.kwarg.arg, "var_keyword"])
    decorators = {ast.unparse(d) for d in fn.decorator_list}
    if out and out[0][0] in ("self", "cls") and "staticmethod" not in decorators:
        out = out[1:]
    return out


def public(name):
    return not name.startswith("_") or (name.startswith("__") and name.endswith("__") and
                                        name in ("__init__", "__enter__", "__exit__",
                                                 "__call__", "__len__", "__iter__"))


def class_fact(cls):
    fact = {"kind": "class", "bases": [ast.unparse(b) for b in cls.bases], "methods": {},
            "properties": [], "fields": {}}
    decorators = [ast.unparse(d) for d in cls.decorator_list]
    fact["dataclass"] = any(d.split("(")[0].endswith("dataclass") for d in decorators)
    for node in cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and public(node.name):
            decos = {ast.unparse(d) for d in node.decorator_list}
            if "property" in decos:
                fact["properties"].append(node.name)
            else:
                m = {"params": params(node)}
                if "abstractmethod" in decos or "abc.abstractmethod" in decos:
                    m["abstract"] = True
                if "classmethod" in decos or "staticmethod" in decos:
                    m["static"] = True
                fact["methods"][node.name] = m
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and \
                fact["dataclass"] and public(node.target.id):
            f = {}
            if node.value is not None:
                v = node.value
                if isinstance(v, ast.Call) and ast.unparse(v.func).endswith("field"):
                    kw = {k.arg: k.value for k in v.keywords}
                    if "default" in kw:
                        f["default"] = literal(kw["default"])
                    elif "default_factory" in kw:
                        f["default_factory"] = ast.unparse(kw["default_factory"])
                else:
                    f["default"] = literal(v)
            fact["fields"][node.target.id] = f
    return fact


def module_surface(source):
    """{"names": {name: fact}, "all": [...] or None} of one module's source."""
    tree = ast.parse(source)
    names = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and public(node.name):
            names[node.name] = class_fact(node)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and public(node.name):
            names[node.name] = {"kind": "function", "params": params(node)}
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name) and public(t.id) and t.id.isupper():
                    names[t.id] = {"kind": "value"}  # a module constant (PROFILER_DIR)
    declared_all = all_names(tree)
    for n in declared_all or ():  # names the package re-exports from its modules
        names.setdefault(n, {"kind": "reexport"})
    return {"names": names, "all": declared_all}


def all_names(tree):
    """Every name the module's __all__ may hold: its assignments, `+=` and append()s, in
    try/except branches too (optional imports add names where they import); None without."""
    found = None
    for node in ast.walk(tree):
        value = None
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__"
                                                for t in node.targets):
            value = node.value
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and \
                node.target.id == "__all__":
            value = node.value
        elif isinstance(node, ast.Call) and ast.unparse(node.func) == "__all__.append" and \
                node.args:
            value = ast.List(elts=[node.args[0]], ctx=ast.Load())
        if value is None:
            continue
        v = literal(value)
        if isinstance(v, (list, tuple)):
            found = (found or []) + [n for n in v if n not in (found or [])]
    return found


def main(facts_path, git_dir):
    with open(facts_path) as f:
        facts = json.load(f)
    facts["surface"] = {}
    for path in facts["modules"]:
        src = subprocess.run(["git", "-C", git_dir, "show", "%s:%s" % (facts["commit"], path)],
                             capture_output=True, text=True, check=True).stdout
        facts["surface"][path] = module_surface(src)
    with open(facts_path + ".tmp", "w") as f:
        json.dump(facts, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(facts_path + ".tmp", facts_path)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: record_surface.py FACTS.json GIT_DIR")
    main(sys.argv[1], sys.argv[2])
