"""The docstring reader of function tools: Google, NumPy and Sphinx styles, and plain text."""

from __future__ import annotations

import pytest

from agentcore_fsm.core.docstrings import Docstring, parse_docstring


def google(a: int, b: int, *args: int, **options: int) -> int:
    """Add two numbers.

    The sum is exact: the numbers are
    integers.

    Args:
        a (int): The first number,
            wrapped onto a second line.
        b: The second number.

            A second paragraph.
        *args: More numbers.
        **options: Settings (ignored).

    Returns:
        int: The sum.

    Raises:
        ValueError: never.
    """
    return a + b


def numpy(a: int, b: int, c: dict[str, int] | None = None) -> int:
    """Add two numbers.

    The sum is exact.

    Parameters
    ----------
    a, b : int
        The numbers
        to add.
    c : dict(str, int), optional
        Options.

    Returns
    -------
    int
        The sum.
    """
    return a + b


def sphinx(a: int, b: int, c: int = 0) -> int:
    """Add two numbers.

    The sum is exact.

    :param int a: The first
        number.
    :param b: The second number.
    :type b: int
    :parameter c: A third, rarely given.
    :returns: the sum
    :rtype: int
    :raises ValueError: never
    """
    return a + b


def test_google() -> None:
    doc = parse_docstring(google.__doc__)
    assert doc.style == "google"
    assert doc.description == "Add two numbers.\n\nThe sum is exact: the numbers are\nintegers."
    assert doc.params == {
        "a": "The first number, wrapped onto a second line.",
        "b": "The second number.\n\nA second paragraph.",
        "args": "More numbers.",
        "options": "Settings (ignored).",
    }


def test_numpy() -> None:
    doc = parse_docstring(numpy.__doc__)
    assert doc.style == "numpy"
    assert doc.description == "Add two numbers.\n\nThe sum is exact."
    assert doc.params == {"a": "The numbers to add.", "b": "The numbers to add.", "c": "Options."}


def test_sphinx() -> None:
    doc = parse_docstring(sphinx.__doc__)
    assert doc.style == "sphinx"
    assert doc.description == "Add two numbers.\n\nThe sum is exact."
    assert doc.params == {
        "a": "The first number.",
        "b": "The second number.",
        "c": "A third, rarely given.",
    }


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (None, Docstring()),
        ("", Docstring()),
        ("   \n  ", Docstring()),
        ("One line.", Docstring("One line.")),
        (
            "Summary.\n\n    Details, indented\n      and more.\n    ",
            Docstring("Summary.\n\nDetails, indented\n  and more."),
        ),
        # a word followed by a colon is not a section unless it names one
        ("Summary.\n\n    Usage:\n        call it", Docstring("Summary.\n\nUsage:\n    call it")),
    ],
)
def test_plain_text_is_all_description(text: str | None, expected: Docstring) -> None:
    assert parse_docstring(text) == expected


def test_google_sections_that_do_not_list_parameters_end_the_description_only() -> None:
    doc = parse_docstring("Fetch a page.\n\nExample:\n    fetch('x')\n\nNote:\n    Slow.\n")
    assert doc == Docstring("Fetch a page.", {}, "google")


def test_google_item_types_may_hold_parentheses_and_colons_in_the_text() -> None:
    doc = parse_docstring(
        "Do it.\n\nArgs:\n    mapping (dict(str, int)): Keys: values.\n    flag(bool):yes\n"
    )
    assert doc.params == {"mapping": "Keys: values.", "flag": "yes"}


def test_google_keyword_sections_and_a_description_on_the_next_line() -> None:
    doc = parse_docstring(
        "Do it.\n\nKeyword Args:\n    size:\n        How big.\n\nArguments:\n    x: An x.\n"
    )
    assert doc.params == {"size": "How big.", "x": "An x."}


def test_numpy_other_parameters_and_a_parameter_without_text() -> None:
    doc = parse_docstring(
        "Do it.\n\nParameters\n----------\nx\n    An x.\ny : int\n\n"
        "Other Parameters\n----------------\nz : str\n    A z.\n\nNotes\n-----\nz : no\n"
    )
    assert doc.params == {"x": "An x.", "y": "", "z": "A z."}


def test_sphinx_aliases_and_a_text_that_starts_on_the_next_line() -> None:
    doc = parse_docstring(
        "Do it.\n\n:arg x: An x.\n:key y:\n    A y.\n:keyword Optional[int] z: A z.\n"
        ":var w: not a parameter\n"
    )
    assert doc.params == {"x": "An x.", "y": "A y.", "z": "A z."}
