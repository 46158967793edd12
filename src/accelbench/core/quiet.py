"""What reaches the user's terminal from libraries during a run: accelbench's own notes as one line each, and
the known noise of torch and its compilers filtered out (each entry says why it is noise), while every other
warning and log record still shows.

The noise is matched by message, never by whole category or logger, so a real problem those libraries report
in other words still reaches the user.
"""

from __future__ import annotations

import logging
import re
import warnings
from collections.abc import Callable

from accelbench.core.errors import PluginWarning, SettingsNote

# (logger, message pattern): records torch writes through ``logging`` that say nothing about the results
NOISY_LOGS = (
    # a CPU-only machine: the C++ extension helper looks for a CUDA toolkit it will never use
    ("torch.utils.cpp_extension", r"No CUDA runtime is found"),
    # torchao registers its enums with an API torch 2.14 deprecated; nothing a user can act on
    ("torch.utils._pytree", r"is an Enum subclass and is now natively supported"),
    # the generate scenario tokenizes the whole held-out text once and cuts it into windows of the model's context
    # itself (perplexity, text prompts): no sequence longer than the context ever reaches the model
    ("transformers.tokenization_utils_base", r"Token indices sequence length is longer than the specified maximum"),
)
# (message pattern, module pattern): Python warnings from inside torch's own code, not from the user's
NOISY_WARNINGS = (
    # Inductor's int8 lowering copies a constant with torch.tensor(tensor) (torch/_inductor/mkldnn_lowerings.py)
    (r"To copy construct from a tensor", r"torch\._inductor"),
)


class _Drop(logging.Filter):
    def __init__(self, pattern: str):
        super().__init__()
        self.pattern = re.compile(pattern)

    def filter(self, record: logging.LogRecord) -> bool:
        return not self.pattern.search(record.getMessage())


def install(note: Callable[[str], None], warn: Callable[[str], None] | None = None) -> None:
    """Filter :data:`NOISY_LOGS` and :data:`NOISY_WARNINGS`, and show every :class:`SettingsNote` through
    ``note(text)`` (the CLI's one ``note:`` line) and every :class:`PluginWarning` through ``warn(text)`` (one
    ``warning:`` line) instead of Python's two-line warning format."""
    for name, pattern in NOISY_LOGS:
        logging.getLogger(name).addFilter(_Drop(pattern))
    for message, module in NOISY_WARNINGS:
        warnings.filterwarnings("ignore", message=f".*{message}", module=module)
    shown = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, SettingsNote):
            note(str(message))
        elif warn is not None and issubclass(category, PluginWarning):
            warn(str(message))
        else:
            shown(message, category, filename, lineno, file, line)

    warnings.showwarning = show
