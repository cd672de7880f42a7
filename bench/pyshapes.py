"""pyshapes.py - two workloads with the call shapes that test a tracer's hot-call accounting,
written here so no package or network is needed:

- yaml_like(n): an event parser in PyYAML's shape. Parser.check_event is called over and over by
  the composer and returns at once while an event is pending; when none is, the same call runs
  the parser's state machine and the scanner under it (deep work). Mostly tiny, sometimes long.
- sympy_like(n): expressions built and expanded through a cache decorator in sympy's shape
  (cacheit): one wrapper code object serves every cached function; a hit is tiny, a miss calls
  the function, which calls other cached functions through the same wrapper (recursion through
  it).

Each returns a value so the work cannot be skipped. Run alone: python3 bench/pyshapes.py
[yaml|sympy] [N]."""

import sys


# ---- yaml_like ---------------------------------------------------------------------------
def make_document(n):
    """A block mapping of n entries, each a scalar, a flow list or a nested mapping."""
    lines = []
    for i in range(n):
        if i % 3 == 0:
            lines.append("key%d: value number %d" % (i, i))
        elif i % 3 == 1:
            lines.append("list%d: [a%d, b%d, c%d]" % (i, i, i, i))
        else:
            lines.append("map%d:\n  inner: %d\n  other: text %d" % (i, i, i))
    return "\n".join(lines) + "\n"


class Token:
    __slots__ = ("kind", "value", "indent")

    def __init__(self, kind, value, indent):
        self.kind = kind
        self.value = value
        self.indent = indent


class Scanner:
    def __init__(self, text):
        self.text = text
        self.pos = 0
        self.pending = []

    def peek_char(self, k=0):
        p = self.pos + k
        return self.text[p] if p < len(self.text) else "\0"

    def forward(self, k=1):
        self.pos += k

    def is_plain(self, c):
        return c not in ":,[]\n\0"

    def scan_plain(self):
        start = self.pos
        while self.is_plain(self.peek_char()):
            self.forward()
        return self.text[start:self.pos].strip()

    def skip_spaces(self):
        n = 0
        while self.peek_char() == " ":
            self.forward()
            n += 1
        return n

    def fetch_token(self):
        indent = self.skip_spaces()
        c = self.peek_char()
        if c == "\0":
            return Token("end", None, 0)
        if c == "\n":
            self.forward()
            return self.fetch_token()
        if c in ":,[]":
            self.forward()
            return Token(c, None, indent)
        return Token("scalar", self.scan_plain(), indent)

    def get_token(self):
        if self.pending:
            return self.pending.pop()
        return self.fetch_token()

    def unget(self, tok):
        self.pending.append(tok)


class Parser:
    def __init__(self, scanner):
        self.scanner = scanner
        self.current = None
        self.state = self.parse_key

    def check_event(self, *kinds):
        if self.current is None and self.state is not None:
            self.current = self.state()
        return self.current is not None and (not kinds or self.current[0] in kinds)

    def peek_event(self):
        self.check_event()
        return self.current

    def get_event(self):
        self.check_event()
        ev, self.current = self.current, None
        return ev

    def parse_key(self):
        tok = self.scanner.get_token()
        if tok.kind == "end":
            self.state = None
            return ("end", None)
        if tok.kind == ":":
            return self.parse_value()
        return ("key", tok.value)

    def parse_value(self):
        tok = self.scanner.get_token()
        if tok.kind == "[":
            self.state = self.parse_flow
            return ("seq_start", None)
        if tok.kind == "scalar":
            self.state = self.parse_key
            return ("scalar", tok.value)
        self.state = self.parse_key  # a nested mapping: its keys come next
        self.scanner.unget(tok)
        return ("map_start", None)

    def parse_flow(self):
        tok = self.scanner.get_token()
        if tok.kind == "]":
            self.state = self.parse_key
            return ("seq_end", None)
        if tok.kind == ",":
            return self.parse_flow()
        return ("scalar", tok.value)


class Composer:
    def __init__(self, parser):
        self.parser = parser

    def compose_node(self):
        p = self.parser
        if p.check_event("seq_start"):
            p.get_event()
            items = []
            while not p.check_event("seq_end", "end"):
                items.append(p.get_event()[1])
            p.get_event()
            return items
        if p.check_event("scalar"):
            return p.get_event()[1]
        return p.get_event()[1]

    def compose_document(self):
        out = {}
        p = self.parser
        while not p.check_event("end"):
            if p.check_event("key"):
                key = p.get_event()[1]
                out[key] = self.compose_node()
            else:
                p.get_event()
        return out


def yaml_like(n):
    doc = make_document(n)
    return len(Composer(Parser(Scanner(doc))).compose_document())


# ---- sympy_like --------------------------------------------------------------------------
_CACHE = {}


def cacheit(f):
    def wrapper(*args):
        key = (f, args)
        try:
            return _CACHE[key]
        except KeyError:
            pass
        r = f(*args)
        _CACHE[key] = r
        return r
    return wrapper


@cacheit
def add(a, b):
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    return ("+", a, b)


@cacheit
def mul(a, b):
    if isinstance(a, int) and isinstance(b, int):
        return a * b
    if isinstance(a, tuple) and a[0] == "+":
        return add(mul(a[1], b), mul(a[2], b))
    if isinstance(b, tuple) and b[0] == "+":
        return add(mul(a, b[1]), mul(a, b[2]))
    return ("*", a, b)


@cacheit
def expand(e):
    if not isinstance(e, tuple):
        return e
    if e[0] == "+":
        return add(expand(e[1]), expand(e[2]))
    return mul(expand(e[1]), expand(e[2]))


@cacheit
def power(e, k):
    return e if k == 1 else mul(e, power(e, k - 1))


def sympy_like(n):
    total = 0
    for i in range(n):
        if i % 40 == 0:
            _CACHE.clear()  # as sympy's cache fills and evicts: misses come in bursts
        x = ("+", "x", i % 7)
        e = expand(power(x, 2 + i % 5))
        total += len(str(e)) if i % 97 == 0 else 1
    return total


if __name__ == "__main__":
    which = sys.argv[1] if len(sys.argv) > 1 else "yaml"
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    print((yaml_like if which == "yaml" else sympy_like)(n))
