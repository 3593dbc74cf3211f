"""The command line of the Kafka tools that parse theirs with argparse4j 0.7.0 (kafka-transactions.sh),
as argparse4j does it: sub-commands, unambiguous prefixes, its usage and help layout (justified text),
its error wording and "Did you mean" hints, and Kafka's exit codes around it. ``jopt.py`` is the same
for the tools on jopt-simple."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any, NoReturn

from headwater.admin.jopt import java_line_pieces

PROG = "kafka-transactions.sh"  # the one tool on argparse4j so far; its usage and errors name it


@dataclass(frozen=True)
class Arg:
    """One optional argument; ``type`` None takes no value (help, version)."""

    flags: tuple[str, ...]
    help: str
    type: str | None = "String"  # the Java class its value converts to
    required: bool = False
    metavar: str | None = None
    default: Any = None
    group: int = -1  # index of its argument group (a help section of its own); -1: none

    @property
    def dest(self) -> str:  # the first long flag's name, else the first flag's
        return ([f for f in self.flags if f.startswith("--")] or list(self.flags))[0].lstrip("-").replace("-", "_")

    @property
    def name(self) -> str:
        return "/".join(self.flags)

    def _with_metavar(self, flag: str) -> str:
        return flag if self.type is None else f"{flag} {self.metavar or self.dest.upper()}"

    def usage(self) -> str:
        return self._with_metavar(self.flags[0]) if self.required else f"[{self._with_metavar(self.flags[0])}]"

    def title(self) -> str:
        return ", ".join(self._with_metavar(f) for f in self.flags)


HELP = Arg(("-h", "--help"), "show this help message and exit", None)
VERSION = Arg(("-v", "--version"), "show the version of this Kafka distribution and exit", None)


@dataclass
class Parser:
    command: str | None
    args: list[Arg]
    help: str = ""  # its line in the main help's command list
    description: str = ""
    groups: list[tuple[str, str]] = field(default_factory=list)  # (title, description)
    commands: dict[str, Parser] = field(default_factory=dict)
    parent: Parser | None = None

    def __post_init__(self) -> None:
        self.args = [HELP, *self.args]
        self.index = {f: a for a in self.args for f in a.flags}
        for sub in self.commands.values():
            sub.parent = self

    def resolve(self, flag: str) -> Arg | None:
        """The argument ``flag`` names, or abbreviates unambiguously."""
        if flag in self.index:
            return self.index[flag]
        found = sorted(f for f in self.index if f.startswith(flag))
        if len(found) > 1:
            raise ArgError(f"ambiguous option: {flag} could match {', '.join(found)}", self)
        return self.index[found[0]] if found else None

    def resolve_command(self, name: str) -> Parser:
        found = [c for c in self.commands if c.startswith(name)] if name else []
        if name in self.commands or len(found) == 1:
            return self.commands[name if name in self.commands else found[0]]
        if found:
            raise ArgError(f"ambiguous command: {name} could match {', '.join(sorted(found))}", self)
        choices = ", ".join(f"'{c}'" for c in self.commands)
        raise ArgError(f"invalid choice: '{name}' (choose from {choices})", self, name, [(c, c) for c in self.commands])


class ArgError(Exception):
    """argparse4j's ArgumentParserException: the usage of ``parser``, the message, maybe suggestions."""

    def __init__(self, message: str, parser: Parser, suggest: str | None = None,
                 subjects: list[tuple[str, str]] | None = None) -> None:
        super().__init__(message)
        self.parser, self.suggest, self.subjects = parser, suggest, subjects or []

    def render(self, width: int) -> str:
        text = usage(self.parser, width) + wrap(f"{PROG}: error: {self}\n", width, 0, "")
        return text + (did_you_mean(self.suggest, self.subjects) if self.suggest is not None else "")


class HelpOrVersion(Exception):
    """``--help`` (of ``parser``) or ``--version`` (no parser): argparse4j runs them where it meets them."""

    def __init__(self, parser: Parser | None) -> None:
        self.parser = parser


_NEGATIVE_NUMBER = re.compile(r"-\d+")
_JAVA_BITS = {"Short": 16, "Integer": 32, "Long": 64}


def _is_flag(term: str) -> bool:
    """Dashes and something after them, and no negative number."""
    return term.lstrip("-") != term and bool(term.lstrip("-")) and not _NEGATIVE_NUMBER.fullmatch(term)


def _convert(arg: Arg, value: str, parser: Parser) -> Any:
    """``Integer.valueOf`` and its siblings, with their NumberFormatException messages."""
    if arg.type == "String" or arg.type is None:
        return value
    reason = f'For input string: "{value}"'
    if re.fullmatch(r"[+-]?[0-9]+", value):
        n, bits = int(value), _JAVA_BITS[arg.type]
        if -(1 << (bits - 1)) <= n < 1 << (bits - 1):
            return n
        if bits == 16 and -(1 << 31) <= n < 1 << 31:  # Short.parseShort parses an int first
            reason = f'Value out of range. Value:"{value}" Radix:10'
    raise ArgError(f"argument {arg.name}: could not convert '{value}' to {arg.type} ({reason})", parser)


@dataclass
class _State:
    deferred: ArgError | None = None  # a missing required option: reported once everything else parsed
    separated: bool = False  # after "--" nothing is an option


def parse(main: Parser, argv: list[str]) -> dict[str, Any]:
    """argparse4j's ``parseArgs``: a namespace, or ArgError / HelpOrVersion."""
    ns: dict[str, Any] = {}
    _parse(main, argv, 0, ns, state := _State())
    if state.deferred is not None:
        raise state.deferred
    return ns


def _run(arg: Arg, parser: Parser) -> NoReturn:
    raise HelpOrVersion(parser if arg is HELP else None)


def _parse(p: Parser, argv: list[str], i: int, ns: dict[str, Any], state: _State) -> None:
    ns.update({a.dest: a.default for a in p.args if a is not HELP})
    used: set[Arg] = set()
    while i < len(argv):
        term = argv[i]
        if not state.separated and _is_flag(term):
            flag, eq, value = term.partition("=")
            arg = p.resolve(flag)
            if arg is None:
                if not term.startswith("--"):  # concatenated short options, as -hv
                    for short in (p.index.get("-" + c) for c in term[1:]):
                        if short is None:
                            break
                        _run(short, p)
                body = term.lstrip("-")
                subjects = [(f, f.lstrip("-")) for a in p.args for f in a.flags if len(f.lstrip("-")) > 1]
                raise ArgError(f"unrecognized arguments: '{term}'", p, body if len(body) >= 2 else None, subjects)
            i += 1
            if arg.type is None:
                if eq:
                    raise ArgError(f"argument {arg.name}: ignore implicit argument '{value}'", p)
                _run(arg, p)
            if not eq:
                if i == len(argv) or (not state.separated and (argv[i] == "--" or _is_flag(argv[i]))):
                    raise ArgError(f"argument {arg.name}: expected one argument", p)
                value, i = argv[i], i + 1
            ns[arg.dest] = _convert(arg, value, p)
            used.add(arg)
        elif term == "--" and not state.separated:
            state.separated, i = True, i + 1
        elif p.commands and not state.separated:
            _check_required(p, used, state)
            sub = p.resolve_command(term)
            _parse(sub, argv, i + 1, ns, state)
            ns["command"] = sub.command
            return
        else:
            raise ArgError(f"unrecognized arguments: '{' '.join(argv[i:])}'", p)
    if p.commands:
        raise ArgError("too few arguments", p)
    _check_required(p, used, state)


def _check_required(p: Parser, used: set[Arg], state: _State) -> None:
    if state.deferred is not None:  # an earlier parser's missing option is the one reported
        return
    for arg in p.args:  # of this parser's missing ones, the last
        if arg.required and arg not in used:
            state.deferred = ArgError(f"argument {arg.name} is required", p)


def format_width() -> int:
    """argparse4j's terminal width detection: ``$COLUMNS`` (else the terminal's columns) less 5, else 75."""
    columns = os.environ.get("COLUMNS")
    if columns is not None:
        width = int(columns) - 5 if re.fullmatch(r"[+-]?[0-9]{1,9}", columns) else -1
    else:
        try:
            with open("/dev/tty") as tty:  # where argparse4j's stty reads
                width = os.get_terminal_size(tty.fileno()).columns - 5
        except OSError:
            width = -1
    return width if width > 0 else 75


def java_div(a: int, b: int) -> int:
    return abs(a) // abs(b) * (1 if (a >= 0) == (b > 0) else -1)


def _justify(line: str, width: int, current: int) -> str:
    """argparse4j's ``TextHelper.adjustSpace``: a wrapped line stretched to ``width`` by widening its gaps,
    the odd spaces going to the middle gaps."""
    text = line.strip(" ")
    current -= len(line) - len(text)
    parts = re.split(r"( +)", text)
    if (gaps := len(parts) // 2) == 0:
        return text
    each = java_div(width - current, gaps)
    rem = width - current - each * gaps
    first = java_div(gaps - rem + 1, 2)
    for gap in range(gaps):
        parts[2 * gap + 1] += " " * max(0, each + (1 if first <= gap < first + rem else 0))
    return "".join(parts)


def wrap(text: str, width: int, offset: int, indent: str) -> str:
    """argparse4j's ``TextHelper.wrap``: ``text`` cut at the JDK's line breaks, full lines justified."""
    out, line, current = "", "", offset
    for piece in java_line_pieces(text):
        current += len(piece)
        if current > width:
            out += _justify(line, width, current - len(piece)) + "\n" + indent
            line, current = "", len(indent) + len(piece)
        line += piece
        if piece.endswith("\n"):
            out, line, current = out + line + indent, "", len(indent)
    return out + line


def _help_line(title: str, text: str, width: int) -> str:
    if not text:
        return f"  {title}\n"
    pad = " " * (23 - len(title)) if len(title) <= 21 else "\n" + " " * 25
    return f"  {title}{pad}{wrap(text, width, 25, ' ' * 25)}\n"


def usage(p: Parser, width: int) -> str:
    opts = [a.usage() for a in p.parent.args if a.required] if p.parent else []
    opts += ([p.command] if p.command else []) + [a.usage() for a in p.args]
    opts += ["COMMAND", "..."] if p.commands else []
    out = head = f"usage: {PROG}"  # short enough (30 at most) to keep the first option on its line
    current = len(head)
    for n, syntax in enumerate(opts):
        if n and current + len(syntax) + 1 > width:
            out, current = out + "\n" + " " * len(head), len(head)
        out, current = out + " " + syntax, current + 1 + len(syntax)
    return out + "\n"


def format_help(p: Parser, width: int) -> str:
    out = usage(p, width) + ("\n" + wrap(p.description, width, 0, "") + "\n" if p.description else "")
    out += "\noptional arguments:\n" + "".join(_help_line(a.title(), a.help, width) for a in p.args if a.group < 0)
    if p.commands:
        out += "\ncommands:\n" + _help_line("COMMAND", "", width)
        out += "".join(_help_line("  " + name, sub.help, width) for name, sub in p.commands.items())
    for n, (title, description) in enumerate(p.groups):
        out += f"\n{title}:\n  {wrap(description, width, 2, '  ')}\n\n"
        out += "".join(_help_line(a.title(), a.help, width) for a in p.args if a.group == n)
    return out


def _distance(a: str, b: str) -> int:
    """The edit distance argparse4j (after git's help.c) ranks suggestions by: a swap of neighbours
    costs 0, a substitution 2, an insertion 1, a deletion 4."""
    before, prev = [0] * (len(b) + 1), list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        row = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            row[j] = prev[j - 1] + (0 if a[i - 1] == b[j - 1] else 2)
            if i > 1 and j > 1 and a[i - 1] != b[j - 1] and a[i - 2] == b[j - 1] and a[i - 1] == b[j - 2]:
                row[j] = min(row[j], before[j - 2])
            row[j] = min(row[j], prev[j] + 4, row[j - 1] + 1)
        before, prev = prev, row
    return prev[len(b)]


def did_you_mean(body: str, subjects: list[tuple[str, str]]) -> str:
    ranked = sorted((0 if s_body.startswith(body) else _distance(body, s_body), s) for s, s_body in subjects)
    if not ranked or ranked[0][0] >= 7:
        return ""
    return "\nDid you mean:\n" + "".join(f"\t{s}\n" for score, s in ranked if score <= ranked[0][0])


