"""bench/pyworkload.py [ROUNDS] - a pure-Python workload for bench_pyrun.py: a tokenizer, a
recursive-descent parser and an evaluator of arithmetic programs, a few hundred distinct small
functions, objects sorted by key functions: the shape of a parser library run (PyYAML,
pygments), not one hot loop."""
import sys


class Token:
    __slots__ = ("kind", "text")

    def __init__(self, kind, text):
        self.kind = kind
        self.text = text


def is_digit(c):
    return "0" <= c <= "9"


def is_name(c):
    return c.isalpha() or c == "_"


def tokenize(src):
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if c.isspace():
            i += 1
        elif is_digit(c):
            j = i
            while j < n and is_digit(src[j]):
                j += 1
            out.append(Token("num", src[i:j]))
            i = j
        elif is_name(c):
            j = i
            while j < n and (is_name(src[j]) or is_digit(src[j])):
                j += 1
            out.append(Token("name", src[i:j]))
            i = j
        else:
            out.append(Token("op", c))
            i += 1
    return out


class Parser:
    def __init__(self, toks):
        self.toks, self.i = toks, 0

    def peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self):
        t = self.toks[self.i]
        self.i += 1
        return t

    def expr(self):
        node = self.term()
        while self.peek() is not None and self.peek().text in "+-":
            node = (self.take().text, node, self.term())
        return node

    def term(self):
        node = self.factor()
        while self.peek() is not None and self.peek().text in "*/%":
            node = (self.take().text, node, self.factor())
        return node

    def factor(self):
        t = self.take()
        if t.text == "(":
            node = self.expr()
            self.take()
            return node
        if t.kind == "num":
            return int(t.text)
        return ("var", t.text)


def evaluate(node, env):
    if isinstance(node, int):
        return node
    if node[0] == "var":
        return env.get(node[1], 1)
    a, b = evaluate(node[1], env), evaluate(node[2], env)
    return OPS[node[0]](a, b)


OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
       "/": lambda a, b: a // b if b else 0, "%": lambda a, b: a % b if b else 0}


def make_handlers(n):
    """n distinct functions, as a library's many small ones."""
    fns = []
    for k in range(n):
        ns = {}
        exec("def handler_%d(x):\n    return (x * %d + 7) %% 1009\n" % (k, k + 1), ns)
        fns.append(ns["handler_%d" % k])
    return fns


def program(seed):
    parts, x = [], seed
    for _ in range(12):
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        parts.append("(%d + v%d * %d)" % (x % 97, x % 5, x % 13 + 1))
    return " * ".join(parts[:4]) + " - " + " + ".join(parts[4:])


def main(rounds):
    handlers = make_handlers(300)
    total = 0
    for r in range(rounds):
        tree = Parser(tokenize(program(r))).expr()
        v = evaluate(tree, {"v%d" % k: k + r for k in range(5)})
        total += handlers[r % len(handlers)](v)
        rows = sorted(((h(r) , i) for i, h in enumerate(handlers[:20])), key=lambda p: p[0])
        total += rows[0][1]
    print(total)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3000)
