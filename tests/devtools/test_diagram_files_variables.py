"""diagrams/README.md lists each machine's declared variables with every name that may write
them: the inputs' writes (``tool_finished`` adding a nested run's usage, say) show nowhere else
in the drawings."""

from __future__ import annotations

from agentcore_fsm.core.declaration import declaration_names, load_declaration
from agentcore_fsm.devtools.diagram_files import readme_text


def test_the_readme_lists_every_variable_and_its_setters() -> None:
    names = declaration_names()
    text = readme_text(names)
    rows = {line for line in text.splitlines() if line.startswith("| `")}
    expected = set()
    for name in names:
        for var in load_declaration(name).variables.values():
            setters = ", ".join(f"`{s}`" for s in var.set_by)
            expected.add(f"| `{var.name}` | `{var.type.replace('|', chr(92) + '|')}` | {setters} |")
    assert expected and expected <= rows
    assert (
        "| `usage` | `RunUsage \\| None` | `start`, `turn_start`, `assistant_end`, "
        "`begin_calls`, `limit_turn`, `tool_finished` |"
    ) in rows
