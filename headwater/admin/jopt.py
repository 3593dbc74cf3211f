"""Kafka's command-line conventions, for the tools that stand in for Kafka's scripts.

Kafka's tools parse their options with jopt-simple 5.0.4 and report with
``server-common/.../util/CommandLineUtils.java``: no arguments or ``--help`` prints the tool's
description and jopt-simple's option table to stderr and exits 1; an unknown option, an option
without its argument or an argument that does not convert stops the tool with jopt-simple's
message (stderr, exit 1); ``--version`` prints the version and exits 0. Scripts and people read
these, so :class:`KafkaCommand` (a click command) does the same.

The option table is jopt-simple's ``BuiltinHelpFormatter``: options sorted by name, two columns in
80 characters, each cell cut at the line-break opportunities of the JDK's
``BreakIterator.getLineInstance()`` and padded to the column width (so lines end in spaces).
``java_line_pieces`` follows the JDK's line-break rules (``sun/text/resources/BreakIteratorRules``)
for ASCII text, which is all our descriptions hold.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import IO, Any, NoReturn

import click

# The version ``--version`` prints: the Kafka release whose tools these follow, message for message.
KAFKA_VERSION = "3.9.0"

_OVERALL_WIDTH = 80  # BuiltinHelpFormatter()'s defaults
_COLUMN_GAP = 2
_CONTINUATION_INDENT = 2  # jopt-simple's Columns.INDENT_WIDTH

# The JDK's line-break classes, restricted to ASCII: characters that stick to the word they precede,
# that stick to the word they follow, dashes, and everything else ("char", letters and digits among them).
_PRE = r"""$(\[{"'"""
_POST = r"""")\]}!%.,:;?"""
_BREAK = "\x03\t\n\f"
_CHAR = rf"""[^{_BREAK}\r \-{_PRE}{_POST}]"""
_NUMBER = rf"(?:[{_PRE}\-]*[0-9]+(?:[.,][0-9]+)*)"
_WORD = rf"(?:[{_PRE}]*(?:{_CHAR}*|{_NUMBER})(?:-+|[{_POST}]*))"
_LINE_RULE = re.compile(
    rf"{_WORD}(?:['$]{_WORD})* *(?:\(\)[{_POST}]*)?\r?[{_BREAK}]?|\r[{_BREAK}]")


def java_line_pieces(text: str) -> list[str]:
    """``text`` cut where the JDK's line BreakIterator allows a break (each piece keeps its trailing
    spaces). The iterator takes the longest run its rules match, and at least one character."""
    pieces = []
    start = 0
    while start < len(text):
        end = next((e for e in range(len(text), start, -1) if _LINE_RULE.fullmatch(text, start, e)), start + 1)
        pieces.append(text[start:end])
        start = end
    return pieces


def _java_trim(text: str) -> str:
    """``String.trim()``: strips every character up to U+0020, not only whitespace."""
    start, end = 0, len(text)
    while start < end and text[start] <= " ":
        start += 1
    while end > start and text[end - 1] <= " ":
        end -= 1
    return text[start:end]


def _cell_lines(raw: str, width: int) -> list[str]:
    """jopt-simple's ``Columns.piecesOf``: the cell's own lines, each filled word by word up to ``width``;
    a line that had to be wrapped goes on indented by two."""
    out: list[str] = []
    lines = _java_trim(raw).split("\n")
    while lines and not lines[-1]:
        lines.pop()  # Java's split drops trailing empty strings
    for line in lines:
        piece = ""
        for word in java_line_pieces(line):
            if len(piece) + len(word) > width:
                out.append(piece.rstrip())
                piece = " " * _CONTINUATION_INDENT + word
            else:
                piece += word
        if piece:
            out.append(piece)
    return out


@dataclass(frozen=True)
class OptionDoc:
    """One option as jopt-simple describes it."""

    name: str  # without dashes
    description: str
    argument: str | None = None  # ``describedAs``; None for an option that takes no argument
    type_indicator: str = "String"  # ``ofType``'s short class name, or a converter's value pattern
    defaults: tuple[str, ...] = ()

    def display(self) -> str:
        text = ("--" if len(self.name) > 1 else "-") + self.name
        if self.argument is not None:
            text += f" <{self.type_indicator}: {self.argument}>" if self.argument else f" <{self.type_indicator}>"
        return text

    def described(self) -> str:
        if not self.defaults:
            return self.description
        shown = self.defaults[0] if len(self.defaults) == 1 else "[" + ", ".join(self.defaults) + "]"
        return f"{self.description} (default: {shown})".strip()


def help_table(options: Iterable[OptionDoc]) -> str:
    """jopt-simple 5.0.4's ``BuiltinHelpFormatter(80, 2)`` output for ``options``."""
    rows = [("Option", "Description"), ("------", "-----------")]
    rows += [(o.display(), o.described()) for o in sorted(options, key=lambda o: o.name)]

    def widths(rows: Sequence[tuple[str, str]]) -> tuple[int, int]:
        option_width = min((_OVERALL_WIDTH - _COLUMN_GAP) // 2, max(len(o) for o, _d in rows))
        description_width = min(_OVERALL_WIDTH - option_width - _COLUMN_GAP, max(len(d) for _o, d in rows))
        return option_width, description_width

    option_width, description_width = widths(rows)
    fitted: list[tuple[str, str]] = []
    for option, description in rows:
        left, right = _cell_lines(option, option_width), _cell_lines(description, description_width)
        for i in range(max(len(left), len(right))):
            fitted.append((left[i] if i < len(left) else "", right[i] if i < len(right) else ""))
    option_width, description_width = widths(fitted)  # padded to the widest fitted cell, as jopt-simple does
    return "".join(f"{o.ljust(option_width)}{' ' * _COLUMN_GAP}{d.ljust(description_width)}\n" for o, d in fitted)


# --- click ----------------------------------------------------------------------------------------


class JoptOption(click.Option):
    """A click option that also carries what jopt-simple shows for it: its description (Kafka's words,
    kept as given: click's ``help`` would expand the tabs Kafka's descriptions hold), ``describedAs``,
    the argument's type and the default."""

    def __init__(self, *args: Any, description: str = "", described_as: str | None = None,
                 type_indicator: str = "String", shown_default: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.description = description
        self.described_as = described_as
        self.type_indicator = type_indicator
        self.shown_default = shown_default

    @property
    def long_name(self) -> str:
        return self.opts[0].lstrip("-")

    def doc(self) -> OptionDoc:
        argument = None if self.is_flag else (self.described_as or "")
        return OptionDoc(self.long_name, self.description, argument, self.type_indicator,
                         () if self.shown_default is None else (self.shown_default,))


class JoptError(click.ClickException):
    """A command line jopt-simple rejects: its message alone on stderr, exit 1."""

    exit_code = 1

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(self.message, err=True)


class JoptUsage(click.ClickException):
    """``CommandLineUtils.printUsageAndExit``: the message, then the option table, on stderr; exit 1."""

    exit_code = 1

    def __init__(self, message: str, table: str) -> None:
        super().__init__(message)
        self.table = table

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(self.message, err=True)
        click.echo(self.table, err=True, nl=False)


class JavaInt(click.ParamType[int]):
    """``ofType(Integer.class)`` / ``ofType(Long.class)``: decimal digits with an optional sign, in range."""

    name = "integer"

    def __init__(self, bits: int) -> None:
        self.limit = 1 << (bits - 1)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        text = str(value)
        if re.fullmatch(r"[+-]?[0-9]+", text) and -self.limit <= int(text) < self.limit:
            return int(text)
        raise JoptError(f"Cannot parse argument '{text}' of option {_long_name(param)}")


class JavaEnum(click.ParamType[str]):
    """jopt-simple's ``EnumConverter``: the constant whose name matches, ignoring case."""

    name = "enum"

    def __init__(self, constants: Sequence[str]) -> None:
        self.constants = list(constants)

    @property
    def pattern(self) -> str:
        return "[" + ",".join(self.constants) + "]"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        for constant in self.constants:
            if constant.lower() == str(value).lower():
                return constant
        raise JoptError(f"Cannot parse argument '{value}' of option {_long_name(param)}")


def _long_name(param: click.Parameter | None) -> str:
    return param.opts[0].lstrip("-") if param is not None and param.opts else "?"


class KafkaCommand(click.Command):
    """A click command that parses and reports as Kafka's jopt-simple tools do (see the module doc).

    ``tool_help`` is the line printed above the option table. Positional arguments are accepted and
    ignored, as jopt-simple does. ``given_options(ctx)`` is the options of the command line in the
    order given (``OptionSet.specs()``), for the checks of which option goes with which action.
    """

    def __init__(self, *args: Any, tool_help: str, **kwargs: Any) -> None:
        settings = dict(kwargs.pop("context_settings", None) or {})
        settings.update(help_option_names=[], allow_extra_args=True)
        kwargs["context_settings"] = settings
        super().__init__(*args, **kwargs)
        self.tool_help = tool_help
        self.params.append(JoptOption(["--help"], is_flag=True, expose_value=False,
                                      description="Print usage information."))
        self.params.append(JoptOption(["--version"], is_flag=True, expose_value=False,
                                      description="Display Kafka version."))

    def help_table(self) -> str:
        return help_table(p.doc() for p in self.params if isinstance(p, JoptOption))

    def usage(self, message: str) -> JoptUsage:
        return JoptUsage(message, self.help_table())

    def get_help(self, ctx: click.Context) -> str:
        return f"{self.tool_help}\n{self.help_table()}"

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args:
            raise self.usage(self.tool_help)
        try:
            _values, _rest, order = self.make_parser(ctx).parse_args(args=list(args))
        except click.NoSuchOption as exc:
            raise JoptError(f"{exc.option_name.lstrip('-')} is not a recognized option") from None
        except click.BadOptionUsage as exc:
            if "requires an argument" not in exc.message:
                raise JoptError(exc.message) from None
            raise JoptError(f"Option {exc.option_name.lstrip('-')} requires an argument") from None
        names: list[str] = []
        for param in order:
            if isinstance(param, JoptOption) and param.long_name not in names:
                names.append(param.long_name)
        if "help" in names:
            raise self.usage(self.tool_help)
        if "version" in names:
            click.echo(KAFKA_VERSION)
            ctx.exit(0)
        ctx.meta["jopt.given"] = names
        return super().parse_args(ctx, args)


def given_options(ctx: click.Context) -> list[str]:
    """The options on the command line, each once, in the order first given (names without dashes)."""
    names: list[str] = ctx.meta.get("jopt.given", [])
    return names


def usage_error(message: str) -> NoReturn:
    """``CommandLineUtils.printUsageAndExit`` from inside a command's callback."""
    command = click.get_current_context().command
    assert isinstance(command, KafkaCommand)
    raise command.usage(message)
