"""The regular expressions compiled on first use (``promptweave._patterns``)."""

from __future__ import annotations

import copy
import re

from promptweave._patterns import lazy_pattern


def test_a_lazy_pattern_compiles_on_first_use_and_then_is_the_pattern() -> None:
    pattern = lazy_pattern(r"(?P<word>[a-z]+)-(\d+)", re.IGNORECASE)
    assert "search" not in vars(pattern)
    found = pattern.search("xx ABC-12")
    assert found is not None and found.group("word") == "ABC"
    compiled = re.compile(r"(?P<word>[a-z]+)-(\d+)", re.IGNORECASE)
    assert pattern.search == compiled.search
    assert pattern.sub("#", "a-1 b-2") == "# #"
    assert pattern.split("a-1b") == ["", "a", "1", "b"]
    assert pattern.findall("a-1 b-2") == [("a", "1"), ("b", "2")]
    assert [m.group(0) for m in pattern.finditer("a-1 b-2")] == ["a-1", "b-2"]
    assert pattern.fullmatch("a-1") is not None and pattern.match("-1") is None
    assert (pattern.pattern, pattern.flags, pattern.groups) == (
        compiled.pattern,
        compiled.flags,
        compiled.groups,
    )
    assert pattern.groupindex == {"word": 1}


def test_a_lazy_pattern_reports_a_bad_pattern_when_first_used() -> None:
    pattern = lazy_pattern("(")
    try:
        pattern.search("x")
    except re.error:
        pass
    else:
        raise AssertionError("a pattern that does not compile must raise on use")


def test_special_names_do_not_compile_a_lazy_pattern() -> None:
    pattern = lazy_pattern("a+")
    copy.copy(pattern)
    assert "search" not in vars(pattern)
    assert repr(pattern) == "lazy_pattern('a+', 0)"
