"""The cluster token, found as the Go side finds it (internal/auth): ``RAYGO_AUTH_TOKEN``,
else the file at ``RAYGO_AUTH_TOKEN_PATH``, else ``~/.raygo/auth_token``. Every call to the
GCS carries it as ``authorization: Bearer <token>`` metadata, as Ray 2.60's calls do.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Optional

ENV_TOKEN = "RAYGO_AUTH_TOKEN"
ENV_TOKEN_PATH = "RAYGO_AUTH_TOKEN_PATH"
METADATA_KEY = "authorization"

HINT = (
    f"set {ENV_TOKEN} (or {ENV_TOKEN_PATH} to a file holding it, or put it in ~/.raygo/auth_token); "
    "`raygo get-auth-token` on the head prints it"
)


def load_token() -> Optional[str]:
    """The token this process has, or None. A token file that others can read, that is
    empty, or that ``RAYGO_AUTH_TOKEN_PATH`` names but does not exist is a ValueError naming it."""
    token = os.environ.get(ENV_TOKEN, "").strip()
    if token:
        return token
    named = os.environ.get(ENV_TOKEN_PATH, "")
    path = Path(named) if named else Path.home() / ".raygo" / "auth_token"
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        if named:
            raise ValueError(f"{ENV_TOKEN_PATH}={named}: no such file") from None
        return None
    if stat.S_IMODE(mode) & 0o077:
        raise ValueError(f"token file {path}: mode {stat.S_IMODE(mode):o} lets others read it; chmod 600 {path}")
    token = path.read_text().strip()
    if not token:
        raise ValueError(f"token file {path}: empty")
    return token
