"""The command line's wording of library errors whose hint names a Python argument.

A library error names what a Python caller passes (`overwrite=True`, `skip_malformed=True`,
`on_error='skip'`); the command that failed names its own flags instead, or, when it has none
for that, the command that does. `cli_hint` picks the wording for the failed command; every
other error's hint is shown as it is. Errors are named by their import path, so that printing
one never imports a module the command did not need.
"""

from __future__ import annotations

from faithrag.errors import FaithragError

ANY_COMMAND = "*"

CLI_HINTS: dict[str, dict[str, str]] = {
    "faithrag.retrieval.loaders.MalformedDocumentError": {
        "index": "Fix the line, or pass --skip-malformed to skip malformed lines (they are "
                 "counted).",
        ANY_COMMAND: "Fix the line, or index the documents with `faithrag index PATH --out IDX "
                     "--skip-malformed` (it skips and counts malformed lines) and give IDX "
                     "instead of the folder.",
    },
    "faithrag.retrieval.index.IndexExistsError": {
        "index": "Pass --add to add to it (changed documents are replaced, unchanged ones "
                 "skipped), or --overwrite to replace it.",
    },
    "faithrag.eval.datasets.MalformedItemError": dict.fromkeys(
        ("eval", "bench"), "Fix the line, or drop --strict to skip and count malformed lines."),
    "faithrag.methods.common.ChoicesRequiredError": {
        "ask": "Pass the options with --choices, or choose a free-form --method such as "
               "vanilla.",
        **dict.fromkeys(("eval", "bench", "hostile"), "Use a multiple-choice dataset, or choose "
                        "a free-form --method such as vanilla."),
    },
}


def cli_hint(command: str, error: FaithragError) -> str:
    """The hint to print when `command` failed with `error`."""
    for kind in type(error).__mro__:
        by_command = CLI_HINTS.get(f"{kind.__module__}.{kind.__qualname__}")
        if by_command:
            return by_command.get(command, by_command.get(ANY_COMMAND, error.hint))
    return error.hint
