"""The FAQ quotes only messages the code prints: every error heading of `docs/faq.md` is generated from an entry of
`tests/faq_errors.py`, a bad input that makes the code print it, and equals what the code prints now."""

from __future__ import annotations

import re

import pytest
from faq_errors import ENTRIES, FAQ, REGENERATE, error_message, heading_line, marked_headings

PAGE = FAQ.read_text()
MARKED = marked_headings(PAGE)
ERRORS_SECTION = PAGE.split("## Error messages", 1)[1].split("\n## ", 1)[0]


def test_every_marker_names_entries_and_every_entry_is_quoted_once():
    keys = [key for marker, _ in MARKED for key in marker]
    unknown = sorted(set(keys) - set(ENTRIES))
    assert not unknown, f"docs/faq.md marks headings with keys tests/faq_errors.py has no entry for: {unknown}"
    unquoted = sorted(set(ENTRIES) - set(keys))
    assert not unquoted, f"entries of tests/faq_errors.py no heading of docs/faq.md quotes: {unquoted}"
    twice = sorted({key for key in keys if keys.count(key) > 1})
    assert not twice, f"docs/faq.md quotes these entries under several headings: {twice}"


def test_every_heading_that_quotes_a_message_is_generated():
    """A heading of the error section that opens with inline code quotes a message: it must follow a marker."""
    lines = ERRORS_SECTION.splitlines()
    hand_written = [
        line
        for index, line in enumerate(lines)
        if re.match(r"^###\s+`", line) and not (index and lines[index - 1].startswith("<!-- error: "))
    ]
    assert not hand_written, (
        f"docs/faq.md quotes messages in headings that no entry of tests/faq_errors.py generates: {hand_written}. "
        f"Add an entry that makes the code print the message, mark the heading `<!-- error: KEY -->`, and run "
        f"`{REGENERATE}`."
    )


@pytest.mark.parametrize(("marker", "line"), MARKED, ids=[" ".join(marker) for marker, _ in MARKED])
def test_the_heading_is_what_the_code_prints(marker, line):
    expected = heading_line([error_message(key) for key in marker])  # NoMessage (a failure) when nothing is printed
    assert line == expected, (
        f"docs/faq.md: the heading of the entry {' '.join(marker)} is not what the code prints.\n"
        f"  page: {line}\n  code: {expected}\n"
        f"Regenerate the headings with `{REGENERATE}` (then check that the prose under it still fits the message)."
    )
