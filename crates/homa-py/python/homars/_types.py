"""Type aliases of the homars API (for annotations)."""

import os
from typing import Any, Mapping, Tuple, Union

#: ``"IP:port"`` (``"[v6]:port"`` for IPv6) or ``(IP, port)``; names are not
#: resolved.
Address = Union[str, Tuple[str, int]]
#: A message: copied when sent.
Buffer = Union[bytes, bytearray, memoryview]
#: ``None`` (defaults), TOML text, a dict such as ``default_config()``
#: returns, or the path of a TOML file.
ConfigLike = Union[None, str, Mapping[str, Any], "os.PathLike[str]"]
