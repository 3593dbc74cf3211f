"""Kafka's command-line conventions in ``headwater.admin.jopt``: where jopt-simple's help formatter may
break a line (the JDK's ``BreakIterator.getLineInstance()``, rules in the JDK's
``sun/text/resources/BreakIteratorRules.java``) and how it lays out the option table
(jopt-simple 5.0.4's ``BuiltinHelpFormatter``, ``internal/Rows.java`` and ``internal/Columns.java``).
The expected pieces were printed by the JDK 17 line iterator for these strings.
"""

from __future__ import annotations

import pytest

from headwater.admin.jopt import OptionDoc, help_table, java_line_pieces


@pytest.mark.parametrize(
    ("text", "pieces"),
    [
        ("a-b --foo x--y 1-2 a-1 1-a -a",
         ["a-", "b ", "--", "foo ", "x--", "y ", "1-", "2 ", "a-", "1 ", "1-", "a ", "-", "a"]),
        ('(see the --election-type flag). "0,1,2". host:port. (bytes/sec) 1 KB/s.',
         ["(see ", "the ", "--", "election-", "type ", "flag). ", '"0,1,2". ', "host:", "port. ", "(bytes/sec) ",
          "1 ", "KB/s."]),
        ("a/b a.b,c;d:e x(y)z", ["a/b ", "a.", "b,", "c;", "d:", "e ", "x", "(y)", "z"]),
        ('\t[{"topic": "foo", "partition": 1},', ["\t", '[{"topic": ', '"foo", ', '"partition": ', "1},"]),
        ("a%b a$b it's 'q' a'b a<b>", ["a%", "b ", "a$b ", "it's ", "'q' ", "a'b ", "a<b>"]),
        ("10-20 ab-cd-ef -- --- a--b", ["10-", "20 ", "ab-", "cd-", "ef ", "-- ", "--- ", "a--", "b"]),
    ],
)
def test_line_break_opportunities_are_the_jdks(text: str, pieces: list[str]) -> None:
    assert java_line_pieces(text) == pieces


def test_table_layout() -> None:
    # Options sorted by name; a flag has no argument part; a wrapped cell goes on indented by two; an
    # embedded line starts unindented; cells are padded to the widest fitted cell of their column. The
    # expected lines are jopt-simple 5.0.4's printHelpOn for the same three options.
    table = help_table([
        OptionDoc("zeta", "Short."),
        OptionDoc("alpha", "First line\nsecond line", "file", "String"),
        OptionDoc("count", "How many of them there are, counted once and then once more to be sure of it.",
                  "n", "Long", ("-1",)),
    ])
    assert table.splitlines() == [
        "Option                  Description                                           ",
        "------                  -----------                                           ",
        "--alpha <String: file>  First line                                            ",
        "                        second line                                           ",
        "--count <Long: n>       How many of them there are, counted once and then once",
        "                          more to be sure of it. (default: -1)                ",
        "--zeta                  Short.                                                ",
    ]
