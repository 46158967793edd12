"""llama.cpp's ``llama-server`` as a launched server of ``accelbench serve``: its binary, version and command
(:mod:`.server`), the GGUF file it loads and the tokenizer that counts its tokens (:mod:`.checkpoint`, written by
:mod:`.weights` and :mod:`.vocab`). ``gguf`` (the ``serve`` extra) is imported only where a file is written."""

from accelbench.backends.servers.llamacpp.checkpoint import (
    Checkpoint,
    ConversionError,
    convert_folder,
    gguf_checkpoint,
    write_gguf,
)
from accelbench.backends.servers.llamacpp.kind import KIND  # registers the llama.cpp kind
from accelbench.backends.servers.llamacpp.server import (
    METRICS,
    ServerNotFound,
    banned_body,
    find_server,
    fixed_length,
    server_command,
    server_version,
)
from accelbench.backends.servers.llamacpp.weights import PRECISIONS

__all__ = [
    "KIND",
    "METRICS",
    "PRECISIONS",
    "Checkpoint",
    "ConversionError",
    "ServerNotFound",
    "gguf_checkpoint",
    "convert_folder",
    "banned_body",
    "find_server",
    "fixed_length",
    "server_command",
    "server_version",
    "write_gguf",
]
