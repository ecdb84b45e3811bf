"""The cluster token and TLS, found as the Go side finds them (internal/auth,
internal/rpcutil). The token: ``RAYGO_AUTH_TOKEN``, else the file at
``RAYGO_AUTH_TOKEN_PATH``, else ``~/.raygo/auth_token``; every call to the GCS carries it as
``authorization: Bearer <token>`` metadata, as Ray 2.60's calls do. TLS: ``RAYGO_USE_TLS``
and the certificate, key and CA files.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Optional

import grpc

ENV_TOKEN = "RAYGO_AUTH_TOKEN"
ENV_TOKEN_PATH = "RAYGO_AUTH_TOKEN_PATH"
METADATA_KEY = "authorization"


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


TLS_VARIABLES = ("RAYGO_TLS_SERVER_CERT", "RAYGO_TLS_SERVER_KEY", "RAYGO_TLS_CA_CERT")


def tls_credentials() -> Optional[grpc.ChannelCredentials]:
    """With ``RAYGO_USE_TLS=1`` (Ray's ``RAY_USE_TLS``), the mutual-TLS credentials of
    ``RAYGO_TLS_SERVER_CERT``, ``RAYGO_TLS_SERVER_KEY`` and ``RAYGO_TLS_CA_CERT``; None
    without. A missing variable or file is a ValueError naming it."""
    use = os.environ.get("RAYGO_USE_TLS", "").strip().lower()
    if use in ("", "0", "false"):
        return None
    if use not in ("1", "true"):
        raise ValueError(f"RAYGO_USE_TLS={use!r}: must be 1 or 0")
    files = []
    for name in TLS_VARIABLES:
        path = os.environ.get(name, "")
        if not path:
            raise ValueError(f"RAYGO_USE_TLS=1 needs {', '.join(TLS_VARIABLES)}: {name} is not set")
        try:
            files.append(Path(path).read_bytes())
        except OSError as err:
            raise ValueError(f"{name}={path}: {err}") from None
    cert, key, ca = files
    return grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)
